// Traffic classes decide how long an entry lives on SSD (agent traffic: 3 days, chat: 7 days).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer::kvstore {

enum class TrafficClass : uint8_t { kAgent = 0, kChat = 1 };
inline constexpr int kNumTrafficClasses = 2;

inline std::string_view traffic_class_name(TrafficClass c) {
  return c == TrafficClass::kAgent ? "agent" : "chat";
}
inline std::optional<TrafficClass> traffic_class_from_name(std::string_view s) {
  if (s == "agent") return TrafficClass::kAgent;
  if (s == "chat") return TrafficClass::kChat;
  return std::nullopt;
}

}  // namespace deepinfer::kvstore
