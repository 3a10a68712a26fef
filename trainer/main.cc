#include <cstdio>

int main() {
  std::fprintf(stderr, "trainer: not built yet\n");
  return 2;
}
