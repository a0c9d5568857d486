// The connections a listener holds against its max_connections, and which one to let go when it
// is full. A connection is either waiting for a request (accepted or kept alive, and reading the
// next request's header and body) or answering one. The waiting ones are kept oldest wait first
// (nginx's reusable-connection queue): when a newcomer finds the table full, the connection that
// has waited longest for its request is evicted to make room -- an idle keep-alive connection or
// a client trickling a request (slowloris) -- and the newcomer is admitted. Connections answering
// a request (a response in flight, an open stream) are never evicted; when every connection is
// answering, the newcomer is refused. A trickled request keeps its place in the queue: bytes do
// not refresh it, only a completed request does.
#pragma once

#include <list>
#include <memory>
#include <mutex>

namespace tessera::server {

// What the table can ask of a connection. evict() is called from any thread (the one accepting)
// and must close the connection on its own executor.
class Evictable {
 public:
  virtual void evict() = 0;

 protected:
  ~Evictable() = default;
};

class ConnectionTable {
 public:
  // One connection's place; the table's lock guards its fields.
  class Entry {
   public:
    explicit Entry(std::weak_ptr<Evictable> connection) : connection_(std::move(connection)) {}

   private:
    friend class ConnectionTable;
    std::weak_ptr<Evictable> connection_;
    bool counted_ = true;  // holds one of the max_connections places (false once evicted)
    bool waiting_ = false;
    std::list<std::shared_ptr<Entry>>::iterator position_;  // in waiting_, when waiting_
  };
  using EntryPtr = std::shared_ptr<Entry>;

  explicit ConnectionTable(int max_connections) : max_connections_(max_connections) {}

  // A place for `connection`, which starts out waiting for its first request, or nullptr when the
  // table is full and no connection is waiting (refuse it). When the place was taken from the
  // connection that had waited longest, that connection is evicted (its evict() called) before
  // this returns.
  EntryPtr admit(std::weak_ptr<Evictable> connection);
  // The connection waits for a request from now on (after accepting it or answering the last).
  void waiting(const EntryPtr& entry);
  // A whole request arrived and will be answered: the connection leaves the waiting queue. False
  // when it was evicted meanwhile; then it must close instead of answering.
  bool answering(Entry& entry);
  // The connection closed: its place is free.
  void leave(Entry& entry);

  // Connections holding a place (open and not evicted), and how many of them wait.
  int held() const;
  int waiting_count() const;

 private:
  void unlink(Entry& entry);  // under mu_

  const int max_connections_;
  mutable std::mutex mu_;
  int held_ = 0;
  std::list<EntryPtr> waiting_;  // oldest wait first
};

}  // namespace tessera::server
