//! The errors users meet when the front door is used wrong, pinned with what the
//! compiler tells them (`tests/compile_fail/*.stderr`): each must say what to do. The
//! patterns that must compile are `tests/user_code.rs`'s.
//!
//! After a deliberate change of a message, `TRYBUILD=overwrite cargo test --test
//! compile_fail` writes the new expected output; read it before committing.

#[test]
fn misuses_fail_to_compile_with_readable_messages() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
