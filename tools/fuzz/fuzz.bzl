"""baton_fuzz_test: one libFuzzer target, a short deterministic run in the normal tests.

A target is a source file defining
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
(and optionally LLVMFuzzerInitialize) plus a committed seed corpus: a handful of small
valid inputs and every input that once found a bug.

  * Normal build (gcc): a cc_test linking tools/fuzz/fuzz_main.cc, which runs the
    function over the corpus and a fixed number of mutations of it from a fixed seed
    (count-based, never time-based), so `bazel test //...` repeats the same inputs.
  * --config=fuzz (clang-14, ASan + UBSan, see .bazelrc): the same target is a libFuzzer
    binary (-fsanitize=fuzzer). As a test it runs each corpus file once (libFuzzer runs
    file arguments once); tools/fuzz.sh runs it as a fuzzer on a scratch copy of the corpus.

Every target is tagged "fuzz_target" (tools/fuzz.sh finds them by that tag).
"""

load("@rules_cc//cc:defs.bzl", "cc_test")

def baton_fuzz_test(name, srcs, corpus, deps = [], mutations = None, size = "small", tags = [], **kwargs):
    """A fuzz target `name` over the seed files `corpus` (a list or glob of files).

    `mutations` sets how many mutated inputs the normal build's test runs (default:
    fuzz_main.cc's kDefaultMutations); a slow target runs fewer.
    """
    native.filegroup(
        name = name + "_corpus",
        srcs = corpus,
        testonly = True,
    )
    cc_test(
        name = name,
        srcs = srcs,
        size = size,
        args = ["$(rootpaths :%s_corpus)" % name],
        data = [":" + name + "_corpus"],
        deps = deps + select({
            "//tools/fuzz:libfuzzer": [],
            "//conditions:default": ["//tools/fuzz:fuzz_main"],
        }),
        linkopts = select({
            "//tools/fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        env = {"BATON_FUZZ_MUTATIONS": str(mutations)} if mutations else {},
        tags = tags + ["fuzz_target"],
        **kwargs
    )
