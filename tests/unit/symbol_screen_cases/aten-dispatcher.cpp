// Dynamic operator lookup through the dispatcher.
// expect: symbol-aten-compute | c10::Dispatcher
namespace c10 { struct Dispatcher { static Dispatcher& realSingleton(); }; }
void* f() { return &c10::Dispatcher::realSingleton(); }
