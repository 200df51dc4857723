#include "worker/trainer/data/formats/image_folder.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;

bool IsImageFile(const fs::directory_entry& entry) {
  std::error_code ec;
  if (!entry.is_regular_file(ec)) return false;
  const std::string ext = absl::AsciiStrToLower(entry.path().extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

bool IsHidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

ImageFolderLayout ResolveImageFolderLayout(const std::string& data_dir) {
  std::error_code ec;
  const fs::path root(data_dir);
  if (fs::is_directory(root / "train", ec)) {
    ImageFolderLayout layout{(root / "train").string(), ""};
    if (fs::is_directory(root / "val", ec)) layout.test_dir = (root / "val").string();
    return layout;
  }
  return ImageFolderLayout{data_dir, ""};
}

absl::StatusOr<ImageFolderIndex> ScanImageFolder(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": not a directory"));
  }
  ImageFolderIndex index;
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  for (const fs::directory_entry& entry : it) {
    if (entry.is_directory(ec) && !IsHidden(entry.path())) {
      index.classes.push_back(entry.path().filename().string());
    }
  }
  if (index.classes.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": no class directories (expected <data_dir>/<class>/*.jpg|png)"));
  }
  std::sort(index.classes.begin(), index.classes.end());
  for (size_t label = 0; label < index.classes.size(); ++label) {
    const fs::path class_dir = fs::path(dir) / index.classes[label];
    std::vector<std::string> files;
    fs::directory_iterator files_it(class_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat(class_dir.string(), ": cannot list: ", ec.message()));
    }
    for (const fs::directory_entry& entry : files_it) {
      if (IsImageFile(entry) && !IsHidden(entry.path())) files.push_back(entry.path().string());
    }
    if (files.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          class_dir.string(), ": class '", index.classes[label], "' has no .jpg/.jpeg/.png files"));
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files) {
      index.samples.push_back(ImageFolderSample{std::move(f), static_cast<int64_t>(label)});
    }
  }
  return index;
}

absl::Status WriteImageFolderClass(const std::string& dir, const std::string& class_name,
                                   const std::vector<Image>& images, const std::string& extension) {
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string path =
        (fs::path(dir) / class_name / absl::StrFormat("img_%05d%s", i, extension)).string();
    RETURN_IF_ERROR(WriteImageFile(path, images[i]));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
