// The token-file dataset: non-overlapping windows of a memory-mapped uint16 token file.

#include <ATen/ops/empty.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/trainer/data/datasets_internal.h"
#include "worker/trainer/data/formats/token_file.h"

namespace baton::trainer::internal {
namespace {

constexpr char kTrainTokens[] = "train.bin";
constexpr char kValTokens[] = "val.bin";

class TokenDataset final : public Dataset {
 public:
  TokenDataset(std::unique_ptr<TokenFile> file, int64_t context, int64_t vocab_size)
      : file_(std::move(file)), context_(context), size_((file_->size() - 1) / context) {
    info_.name = "tokens";
    info_.language_model = true;
    info_.input_shape = {context_};
    info_.vocab_size = vocab_size;
  }

  int64_t size() const override { return size_; }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices, uint64_t) const override {
    RETURN_IF_ERROR(CheckIndices(indices, size_, file_->path()));
    const auto b = static_cast<int64_t>(indices.size());
    Batch batch{at::empty({b, context_}, at::kLong), at::empty({b, context_}, at::kLong)};
    int64_t* input = batch.input.data_ptr<int64_t>();
    int64_t* target = batch.target.data_ptr<int64_t>();
    for (int64_t j = 0; j < b; ++j) {
      const int64_t begin = indices[j] * context_;
      file_->Copy(begin, absl::MakeSpan(input + j * context_, context_));
      file_->Copy(begin + 1, absl::MakeSpan(target + j * context_, context_));
    }
    return batch;
  }

 private:
  const std::unique_ptr<TokenFile> file_;
  const int64_t context_;
  const int64_t size_;
  DatasetInfo info_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenTokens(const DataOptions& options, Split split) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(options.data_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(options.data_dir, ": no such directory (data_dir)"));
  }
  const std::string path =
      (fs::path(options.data_dir) / (split == Split::kTrain ? kTrainTokens : kValTokens)).string();
  if (split == Split::kTest && !fs::exists(path, ec)) return std::unique_ptr<Dataset>();
  ASSIGN_OR_RETURN(std::unique_ptr<TokenFile> file, TokenFile::Open(path));
  if (file->size() < options.context_length + 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("context_length: %s holds %d tokens, fewer than context_length + 1 = %d",
                        path, file->size(), options.context_length + 1));
  }
  const uint16_t max_token = file->MaxToken();
  if (max_token >= options.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocab_size: %s holds token id %d, so vocab_size must be > %d (got %d)",
                        path, max_token, max_token, options.vocab_size));
  }
  return std::make_unique<TokenDataset>(std::move(file), options.context_length,
                                        options.vocab_size);
}

}  // namespace baton::trainer::internal
