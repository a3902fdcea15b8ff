// The bounded plan cache behind every one-shot call (shapejit::rearrange, shapejit::rope, ...).
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace shapejit {

/// Plans by a caller-built key (the bytes of the call's descriptors). Bounded: a workload that
/// plans a new shape per call (a decode loop) cannot grow it forever; when full it starts over.
template <typename Plan>
class PlanCache {
 public:
  static constexpr std::size_t kMaxPlans = 4096;

  std::optional<Plan> find(const std::string& key) const {
    std::lock_guard lock(mutex_);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    return std::nullopt;
  }

  void insert(const std::string& key, const Plan& plan) {
    std::lock_guard lock(mutex_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(key, plan);
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Plan> plans_;
};

}  // namespace shapejit
