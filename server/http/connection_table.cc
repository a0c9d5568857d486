#include "server/http/connection_table.h"

#include <utility>

namespace tessera::server {

ConnectionTable::EntryPtr ConnectionTable::admit(std::weak_ptr<Evictable> connection) {
  auto entry = std::make_shared<Entry>(std::move(connection));
  std::shared_ptr<Evictable> victim;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ >= max_connections_) {
      if (waiting_.empty()) return nullptr;
      EntryPtr oldest = waiting_.front();
      unlink(*oldest);
      oldest->counted_ = false;
      --held_;
      // Gone already when it is being destroyed: its place is free all the same.
      victim = oldest->connection_.lock();
    }
    ++held_;
    entry->waiting_ = true;
    entry->position_ = waiting_.insert(waiting_.end(), entry);
  }
  if (victim) victim->evict();
  return entry;
}

void ConnectionTable::waiting(const EntryPtr& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entry->counted_ || entry->waiting_) return;
  entry->waiting_ = true;
  entry->position_ = waiting_.insert(waiting_.end(), entry);
}

bool ConnectionTable::answering(Entry& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  unlink(entry);
  return entry.counted_;
}

void ConnectionTable::leave(Entry& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  unlink(entry);
  if (entry.counted_) {
    entry.counted_ = false;
    --held_;
  }
}

int ConnectionTable::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int ConnectionTable::waiting_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiting_.size());
}

void ConnectionTable::unlink(Entry& entry) {
  if (!entry.waiting_) return;
  waiting_.erase(entry.position_);
  entry.waiting_ = false;
}

}  // namespace tessera::server
