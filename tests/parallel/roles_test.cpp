#include "parallel/roles.hpp"

#include <gtest/gtest.h>

using namespace meshloom;
using namespace meshloom::parallel;

TEST(Roles, RoleOrderConstructorsLoadersTrainers) {
  config::Config c;
  c.cluster.roles.constructors = 1;
  c.cluster.roles.loaders = 2;
  RoleLayout l = make_layout(8, c);
  EXPECT_EQ(l.trainers, 5);
  EXPECT_EQ(l.role_of(0), Role::constructor);
  EXPECT_EQ(l.role_of(1), Role::loader);
  EXPECT_EQ(l.role_of(2), Role::loader);
  EXPECT_EQ(l.role_of(3), Role::trainer);
  EXPECT_EQ(l.index_in_role(7), 4);
  EXPECT_EQ(l.first_rank(Role::trainer), 3);
  std::string text = l.describe(std::vector<std::string>(8, "h"));
  EXPECT_NE(text.find("ranks 3-7"), std::string::npos) << text;
}

TEST(Roles, NoTrainerLeftIsRefused) {
  config::Config c;
  c.cluster.roles.constructors = 2;
  c.cluster.roles.loaders = 2;
  EXPECT_THROW(make_layout(4, c), config::ConfigError);
  EXPECT_NO_THROW(make_layout(5, c));
}
