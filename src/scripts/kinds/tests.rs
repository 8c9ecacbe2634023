//! The kind descriptors: names, fields and what each kind excludes.

use super::names::kind_names;
use super::*;

#[test]
fn each_kind_is_told_by_its_key() {
    for kind in LockKind::ALL {
        let names = kind_names("p:", "a:b", kind).unwrap();
        assert_eq!(names.kind.public(), kind);
        assert_eq!(keys::kind_of_key(&names.key), Some(("p:{a:b}", kind)));
        let expected: Vec<String> = match kind {
            LockKind::Mutex => vec![],
            LockKind::Fair => names.queue_keys().to_vec(),
            _ => vec![names.leases_key()],
        };
        assert_eq!(names.operator_keys(), expected);
    }
}

#[test]
fn a_write_holds_field_is_read_as_its_owner_in_each_layout() {
    use super::super::operator::owners_waited_for;
    let holdlock = rw_names("", "a", Kind::write(Compat::Holdlock)).unwrap();
    let fields = ["mode", "writer", "u:1:w", "u:2", "data:u:2"];
    assert_eq!(
        owners_waited_for(&holdlock, fields.into_iter()),
        ["u:1", "u:2"]
    );
    let read = rw_names("", "a", Kind::read(Compat::Redisson)).unwrap();
    let fields = ["mode", "u:1:write", "u:1", "u:2"];
    assert_eq!(owners_waited_for(&read, fields.into_iter()), ["u:1", "u:2"]);
    let semaphore = semaphore_names("", "a", 2, Kind::SEMAPHORE).unwrap();
    assert!(owners_waited_for(&semaphore, ["u:1:p1"].into_iter()).is_empty());
}

#[test]
fn kinds_exclude_as_the_read_write_lock_says() {
    let read = Kind::read(Compat::Holdlock);
    assert!(Kind::WRITE.excludes(read));
    assert!(read.excludes(Kind::WRITE));
    assert!(Kind::WRITE.excludes(Kind::WRITE));
    assert!(!read.excludes(read));
    assert!(Kind::MUTEX.excludes(Kind::MUTEX));
    assert_eq!(Kind::WRITE.field("o:1"), "o:1:w");
    assert_eq!(read.field("o:1"), "o:1");
    assert_ne!(Kind::mutex(Compat::Redisson), Kind::MUTEX);
    assert_eq!(Kind::mutex(Compat::Holdlock), Kind::MUTEX);
}
