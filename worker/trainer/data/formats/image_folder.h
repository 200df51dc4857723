#pragma once

// The image-folder layout (torchvision's ImageFolder): <dir>/<class>/<file>.{jpg,jpeg,png}.
// Classes are the subdirectories sorted by name (byte order) and numbered from 0; samples
// are ordered by class, then file name. Other files and hidden entries are ignored.
//
// A data_dir either is such a folder (the train split; no test split) or holds train/ and
// optionally val/, each such a folder (ImageNet's layout).
//
// Plain C++ (no LibTorch). Functions are thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/data/formats/image.h"

namespace baton::trainer {

struct ImageFolderSample {
  std::string path;
  int64_t label = 0;  // Index into ImageFolderIndex::classes.
};

struct ImageFolderIndex {
  std::vector<std::string> classes;  // Sorted.
  std::vector<ImageFolderSample> samples;
};

// Where the splits of an image-folder data_dir are.
struct ImageFolderLayout {
  std::string train_dir;
  std::string test_dir;  // Empty when there is no test split.
};

// <data_dir>/train and <data_dir>/val when <data_dir>/train is a directory (val only if
// it exists), else data_dir itself with no test split.
ImageFolderLayout ResolveImageFolderLayout(const std::string& data_dir);

// Lists `dir`. NOT_FOUND if it does not exist, FAILED_PRECONDITION (naming the directory)
// if it is not a directory, has no class subdirectories or a class has no image files.
absl::StatusOr<ImageFolderIndex> ScanImageFolder(const std::string& dir);

// Writes images[i] as <dir>/<class_name>/img_<i>.<extension> (".png", ".jpg"), creating
// directories: test data and small tools. Errors as WriteImageFile.
absl::Status WriteImageFolderClass(const std::string& dir, const std::string& class_name,
                                   const std::vector<Image>& images,
                                   const std::string& extension = ".png");

}  // namespace baton::trainer
