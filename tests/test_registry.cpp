// The predictor registry (predictor/registry.hpp): every name it lists builds, the rest is refused.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "predictor/registry.hpp"

using namespace tezip;

TEST_CASE("the predictor registry builds every classical predictor it lists, by name and by identity", "[predictor]") {
  std::set<std::string> names;
  for (const auto& p : predictors()) {
    names.insert(p.name);
    REQUIRE(find_predictor(p.name) == &p);
    if (p.learned) continue;  // needs a model file: tests/test_exact_coding.cpp, tests/test_prednet_coding.cpp
    const auto predictor = make_predictor(p.name);
    REQUIRE(predictor != nullptr);
    // What the archive records rebuilds the same predictor.
    const auto again = predictor_for(predictor->identity());
    CHECK(again->identity().kind == predictor->identity().kind);
    CHECK(again->identity().configuration == predictor->identity().configuration);
  }
  CHECK(names == std::set<std::string>{"auto", "intra", "previous", "linear", "motion", "bidirectional", "prednet"});
  CHECK(find_predictor("transformer") == nullptr);
  CHECK_THROWS_AS(make_predictor("transformer"), std::invalid_argument);
  PredictorIdentity unknown;
  unknown.kind = "transformer";
  CHECK_THROWS_AS(predictor_for(unknown), std::invalid_argument);
}
