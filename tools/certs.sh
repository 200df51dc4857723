#!/usr/bin/env bash
# Makes what a Baton cluster needs for TLS and tokens, with Debian's openssl:
#   a cluster CA, the coordinator's certificate, one certificate per worker, one bearer
#   token per user (the coordinator's token file holds only their SHA-256 hashes), and a
#   CLI config file with one context per user.
#
# Usage: tools/certs.sh OUT_DIR [--coordinator-san SAN,...] [--worker ID]... \
#                               [--user NAME:ROLE]... [--coordinator-address HOST:PORT] [--days N]
#   --coordinator-san  subjectAltNames of the coordinator's certificate, in openssl's form
#                      (default DNS:localhost,IP:127.0.0.1). Add every name or address
#                      workers and users dial, e.g. DNS:baton-coordinator.ns.svc,IP:10.0.0.5.
#   --worker ID        a worker certificate with CN=ID and SAN DNS:ID; the worker registers
#                      as ID (its --worker_id must match, or is taken from the certificate).
#   --user NAME:ROLE   a token for user NAME with role viewer, submitter or admin.
#   --coordinator-address  the address written into config.yaml (default localhost:7070).
#   --days N           validity of new certificates (default 365).
# Re-running with the same OUT_DIR keeps the CA and everything already made (add workers
# or users later); delete a file to re-issue it. Private keys and tokens are 0600.
#
# OUT_DIR afterwards:
#   ca.crt ca.key                    the CA (keep ca.key offline in production)
#   coordinator.crt coordinator.key  baton-coordinator --tls_cert/--tls_key (--ca ca.crt)
#   workers/ID.crt workers/ID.key    baton-worker --tls_cert/--tls_key --ca ca.crt
#   tokens                           baton-coordinator --token_file (hashes only)
#   users/NAME.token                 the user's bearer token (give it to NAME only)
#   config.yaml                      CLI contexts (BATON_CONFIG=OUT_DIR/config.yaml, or copy
#                                    to ~/.config/baton/config.yaml)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }

[[ $# -ge 1 ]] || usage
case "$1" in -h|--help) usage 0 ;; esac
out=$1
shift
sans="DNS:localhost,IP:127.0.0.1"
address="localhost:7070"
days=365
workers=()
users=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --coordinator-san) sans=$2; shift 2 ;;
    --coordinator-address) address=$2; shift 2 ;;
    --worker) workers+=("$2"); shift 2 ;;
    --user) users+=("$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "certs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

umask 077
mkdir -p "$out/workers" "$out/users"
cd "$out"

if [[ ! -f ca.crt ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.crt -days "$((days * 10))" -subj "/CN=baton-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  chmod 644 ca.crt
  echo "made CA $out/ca.crt"
fi

# issue NAME SANS PURPOSE(serverAuth|clientAuth) FILE_PREFIX: a key and a certificate
# signed by the CA (random serial), written only once both exist.
issue() {
  local cn=$1 san=$2 eku=$3 prefix=$4 tmp
  [[ -f $prefix.crt ]] && return 0
  tmp=$(mktemp -d "$prefix.XXXXXX")
  if ! openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/key" \
         -out "$tmp/csr" -subj "/CN=$cn" 2>"$tmp/err" ||
     ! openssl x509 -req -in "$tmp/csr" -CA ca.crt -CAkey ca.key \
         -set_serial "0x$(openssl rand -hex 16)" -out "$tmp/crt" -days "$days" \
         -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' \
                      "$san" "$eku") 2>>"$tmp/err"; then
    cat "$tmp/err" >&2
    rm -rf "$tmp"
    echo "certs.sh: could not issue $out/$prefix.crt" >&2
    exit 1
  fi
  chmod 644 "$tmp/crt"
  mv "$tmp/key" "$prefix.key"
  mv "$tmp/crt" "$prefix.crt"
  rm -rf "$tmp"
  echo "made $out/$prefix.crt (CN=$cn, $san)"
}

issue baton-coordinator "$sans" serverAuth coordinator
for id in "${workers[@]}"; do
  [[ $id =~ ^[A-Za-z0-9._-]+$ ]] || { echo "certs.sh: bad worker id '$id'" >&2; exit 2; }
  issue "$id" "DNS:$id" clientAuth "workers/$id"
done

touch tokens
for spec in "${users[@]}"; do
  name=${spec%%:*}
  role=${spec#*:}
  [[ $name =~ ^[A-Za-z0-9._@-]+$ && $spec == *:* ]] ||
    { echo "certs.sh: --user wants NAME:ROLE, got '$spec'" >&2; exit 2; }
  case "$role" in viewer|submitter|admin) ;;
    *) echo "certs.sh: role '$role' is not viewer, submitter or admin" >&2; exit 2 ;;
  esac
  [[ -f users/$name.token ]] && continue
  token="baton_$(openssl rand -hex 32)"
  printf '%s\n' "$token" > "users/$name.token"
  hash=$(printf '%s' "$token" | openssl dgst -sha256 -r | cut -d' ' -f1)
  printf '%s %s %s\n' "$hash" "$name" "$role" >> tokens
  echo "made a token for $name (role $role): $out/users/$name.token"
done

# The CLI config: one context per user, the first one current.
{
  echo "# baton CLI contexts (made by tools/certs.sh)."
  echo "contexts:"
  first=""
  for f in users/*.token; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .token)
    first=${first:-$name}
    echo "  $name:"
    echo "    coordinator: $address"
    echo "    ca: $PWD/ca.crt"
    echo "    token_file: $PWD/$f"
  done
  if [[ -n $first ]]; then echo "current_context: $first"; fi
} > config.yaml
