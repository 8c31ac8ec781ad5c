#pragma once
// Checks on where an output goes, made before anything is written: tezip never removes or replaces
// a user's input, the folder it runs in, or a file that is not its own kind of output (README,
// "Reliability").
#include <filesystem>
#include <span>

namespace tezip {

// The absolute, normalised form of a path the user gave: trailing slashes stripped, "." and ".."
// resolved to the folder they name, symbolic links in the folders above resolved. A last component
// that is a symbolic link is kept as given, so that -f replaces the link, not what it points to.
// Throws OutputError for an empty path.
std::filesystem::path resolved_path(const std::filesystem::path& path);

// Throws OutputError naming both when `output` is one of `inputs`, holds one, or lies inside one
// (compared by resolved path and, for what exists, by file identity, so hard links and bind mounts
// count too).
void check_output_apart(const std::filesystem::path& output, std::span<const std::filesystem::path> inputs);

// For an output folder that is created whole or, with `overwrite`, replaced whole: throws
// OutputError when it exists without `overwrite`, is not a folder or regular file, or is the root,
// the current folder or one of its ancestors (replacing it would pull the ground from under the
// user's shell).
void check_folder_output(const std::filesystem::path& output, bool overwrite);

// For an output file written under a temporary name and renamed over `output`: throws OutputError
// when it exists without `overwrite`, is a folder or anything but a regular file or symbolic link
// (a device or FIFO is never replaced), or names a folder by its trailing slash.
void check_file_output(const std::filesystem::path& output, bool overwrite);

}  // namespace tezip
