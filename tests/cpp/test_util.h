// A tiny assertion helper for the native tests (no test framework is available offline).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include "pymx/base.h"

// Stops the test with the expression, the location and a message.
#define EXPECT(cond, ...)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "FAILED %s:%d: %s %s\n", __FILE__, __LINE__, #cond,           \
                   ::pymx::str_cat("", ##__VA_ARGS__).c_str());                           \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// The value of type To with the same bits as `from` (C++20's std::bit_cast).
template <typename To, typename From>
To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// Runs `body`, which must throw a std::exception whose message contains `needle`; returns
// the message.
inline std::string expect_throws(const std::function<void()>& body, const std::string& needle,
                                 const char* where) {
  try {
    body();
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (message.find(needle) == std::string::npos) {
      std::fprintf(stderr, "FAILED %s: message \"%s\" lacks \"%s\"\n", where, message.c_str(),
                   needle.c_str());
      std::exit(1);
    }
    return message;
  }
  std::fprintf(stderr, "FAILED %s: expected an exception containing \"%s\"\n", where,
               needle.c_str());
  std::exit(1);
}

#define PMX_STR2(x) #x
#define PMX_STR(x) PMX_STR2(x)
#define EXPECT_THROWS(body, needle) expect_throws([&] { body; }, needle, __FILE__ ":" PMX_STR(__LINE__))
