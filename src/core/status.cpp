#include "hanpu/status.h"

namespace hanpu {

std::string Status::ToString() const {
  const char* prefix = "ok";
  switch (code_) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: prefix = "invalid argument"; break;
    case StatusCode::kNotFound: prefix = "not found"; break;
    case StatusCode::kDataLoss: prefix = "malformed data"; break;
    case StatusCode::kIoError: prefix = "i/o error"; break;
    case StatusCode::kUnimplemented: prefix = "unimplemented"; break;
  }
  return std::string(prefix) + ": " + message_;
}

}  // namespace hanpu
