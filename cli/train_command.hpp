#pragma once

namespace tezip::cli {

// `tezip train DATASET... -o MODEL`: trains a PredNet (docs/training.md). argv[0] is "train".
// Returns the exit code: 0 ok, 1 usage, 2 bad input or training failure.
int run_train(int argc, char** argv);

}  // namespace tezip::cli
