// A library template instantiated with the candidate's type: shared_ptr's control block (a std:: vtable)
// runs the candidate's destructor, inlined into std::_Sp_counted_ptr_inplace<Leak>::_M_dispose. Such
// vtables are followed, unlike those of a library's own classes.
// expect: symbol-escape | getenv
#include <memory>
extern "C" char* getenv(const char*);
struct Leak {
  ~Leak() { sink = getenv("HOME"); }
  static inline const char* volatile sink = nullptr;
};
std::shared_ptr<Leak> make() { return std::make_shared<Leak>(); }
