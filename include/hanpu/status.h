// Status: the error type of every hanpu entry point. Nothing in hanpu aborts or throws on user input;
// a bad argument comes back as a Status whose message names the argument, the expected and the actual value.
#pragma once

#include <string>
#include <utility>

namespace hanpu {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a shape, dtype, stride or option is wrong
  kNotFound,         // a named tensor or file is missing
  kDataLoss,         // a file is malformed or truncated
  kIoError,          // the operating system refused a read or write
  kUnimplemented,    // valid input that this build does not support
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: q.shape[3] (K) = 300, expected 1..256"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }

}  // namespace hanpu

// Propagates a non-OK Status to the caller.
#define HANPU_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::hanpu::Status hanpu_status_ = (expr);  \
    if (!hanpu_status_.ok()) return hanpu_status_; \
  } while (0)
