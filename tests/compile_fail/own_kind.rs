// The kinds of lock are sealed.
struct MyKind;

impl holdlock::acquire::Acquirable for MyKind {}

fn main() {}
