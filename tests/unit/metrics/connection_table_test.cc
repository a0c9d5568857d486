#include "server/http/connection_table.h"

#include <gtest/gtest.h>

#include <memory>

namespace tessera::server {
namespace {

struct FakeConnection : Evictable {
  void evict() override { ++evictions; }
  int evictions = 0;
};

TEST(ConnectionTableTest, AdmitsUpToTheLimitThenEvictsTheLongestWaiting) {
  ConnectionTable table(2);
  auto a = std::make_shared<FakeConnection>();
  auto b = std::make_shared<FakeConnection>();
  auto c = std::make_shared<FakeConnection>();
  ConnectionTable::EntryPtr ea = table.admit(a);
  ConnectionTable::EntryPtr eb = table.admit(b);
  ASSERT_TRUE(ea && eb);
  EXPECT_EQ(table.held(), 2);
  EXPECT_EQ(table.waiting_count(), 2);
  // a answers a request and waits again: b has now waited longest.
  EXPECT_TRUE(table.answering(*ea));
  table.waiting(ea);
  ConnectionTable::EntryPtr ec = table.admit(c);
  ASSERT_TRUE(ec);
  EXPECT_EQ(b->evictions, 1);
  EXPECT_EQ(a->evictions, 0);
  EXPECT_EQ(table.held(), 2);
  // The evicted connection may not answer what it was reading, and does not hold a place.
  EXPECT_FALSE(table.answering(*eb));
  table.waiting(eb);
  EXPECT_EQ(table.waiting_count(), 2);
  table.leave(*eb);
  EXPECT_EQ(table.held(), 2);
  table.leave(*ea);
  EXPECT_EQ(table.held(), 1);
}

TEST(ConnectionTableTest, RefusesWhenEveryConnectionIsAnswering) {
  ConnectionTable table(1);
  auto a = std::make_shared<FakeConnection>();
  ConnectionTable::EntryPtr ea = table.admit(a);
  ASSERT_TRUE(ea);
  EXPECT_TRUE(table.answering(*ea));
  EXPECT_EQ(table.admit(std::make_shared<FakeConnection>()), nullptr);
  EXPECT_EQ(a->evictions, 0);
  // Waiting again, it can be evicted.
  table.waiting(ea);
  auto b = std::make_shared<FakeConnection>();
  EXPECT_NE(table.admit(b), nullptr);
  EXPECT_EQ(a->evictions, 1);
}

TEST(ConnectionTableTest, AConnectionAlreadyGoneFreesItsPlaceWithoutAnEviction) {
  ConnectionTable table(1);
  ConnectionTable::EntryPtr ea;
  {
    auto a = std::make_shared<FakeConnection>();
    ea = table.admit(a);
  }  // destroyed before its leave() ran
  auto b = std::make_shared<FakeConnection>();
  ConnectionTable::EntryPtr eb = table.admit(b);
  ASSERT_TRUE(eb);
  table.leave(*ea);  // late: changes nothing
  EXPECT_EQ(table.held(), 1);
}

}  // namespace
}  // namespace tessera::server
