// Status and Result (base/status.h).
#include "base/status.h"

#include <gtest/gtest.h>

#include <string>

namespace verity {
namespace {

Result<int> FromOkStatus() { return OkStatus(); }

Status Propagates(int* out) {
  VERITY_ASSIGN_OR_RETURN(*out, FromOkStatus());
  return OkStatus();
}

TEST(Result, FromAnOkStatusIsAnInternalErrorNotSuccess) {
  const Result<int> r = FromOkStatus();
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok());
  EXPECT_NE(r.status().message().find("internal error"), std::string::npos) << r.status().message();
  int value = -1;
  const Status s = Propagates(&value);
  EXPECT_FALSE(s.ok()) << "VERITY_ASSIGN_OR_RETURN returned success with no value";
  EXPECT_EQ(value, -1);
}

TEST(Result, KeepsAnErrorAndAValue) {
  const Result<int> e = Status::Error("model.bin: field dim: 0");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "model.bin: field dim: 0");
  const Result<std::string> v = std::string("ok");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), "ok");
}

}  // namespace
}  // namespace verity
