//! The kind descriptors: names, fields and what each kind excludes; and the whole
//! table, printed and compared with a snapshot (`the_table_of_kinds_is_as_written`),
//! so that a descriptor changed by accident fails here, with every kind in view.

use super::layout::{self, Layout};
use super::*;
use crate::keys;
use crate::scripts::leases::SEM_AVAILABLE;
use crate::scripts::operator::{FORCE_UNLOCK, INSPECT};
use crate::scripts::redisson::{
    REDISSON_FAIR_FORCE, REDISSON_FAIR_INSPECT, REDISSON_RW_INSPECT, REDISSON_SEM_FORCE,
    REDISSON_SEM_HELD, REDISSON_SEM_INSPECT,
};

/// The names of the lock `name` of the public `kind` in holdlock's layout, as the
/// operator calls build them.
fn kind_names(prefix: &str, name: &str, kind: LockKind) -> Result<LockNames> {
    let kind = Kind::of_public(kind, Compat::Holdlock);
    (kind.0.layout.names)(prefix, name, kind.public().suffix(), kind)
}

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
    let semaphore = semaphore_names("", "a", 2, Kind::semaphore(Compat::Holdlock)).unwrap();
    assert!(owners_waited_for(&semaphore, ["u:1:p1"].into_iter()).is_empty());
}

#[test]
fn kinds_exclude_as_the_read_write_lock_says() {
    let (read, write) = (Kind::read(Compat::Holdlock), Kind::write(Compat::Holdlock));
    let mutex = Kind::mutex(Compat::Holdlock);
    assert!(write.excludes(read));
    assert!(read.excludes(write));
    assert!(write.excludes(write));
    assert!(!read.excludes(read));
    assert!(mutex.excludes(mutex));
    assert_eq!(write.field("o:1"), "o:1:w");
    assert_eq!(read.field("o:1"), "o:1");
    assert_ne!(Kind::mutex(Compat::Redisson), mutex);
    assert_eq!(Kind::FAIR, Kind::fair(Compat::Holdlock));
}

#[test]
fn each_public_kind_has_its_descriptor_in_each_layout() {
    for compat in [Compat::Holdlock, Compat::Redisson] {
        for public in LockKind::ALL {
            assert_eq!(Kind::of_public(public, compat).public(), public);
        }
        assert_eq!(
            Kind::of_public(LockKind::ReadWrite, compat),
            Kind::write(compat)
        );
    }
}

#[test]
fn a_kind_reads_as_its_label_and_layout() {
    // A side's descriptor names the other side, which names it back: its `Debug` is
    // the label and the layout's family only.
    let read = format!("{:?}", Kind::read(Compat::Redisson));
    assert_eq!(read, r#"Kind("read", Redisson)"#);
}

/// The kinds of one layout's family, in the snapshot's order of columns.
fn kinds_of(compat: Compat) -> [Kind; 5] {
    [
        Kind::mutex(compat),
        Kind::fair(compat),
        Kind::read(compat),
        Kind::write(compat),
        Kind::semaphore(compat),
    ]
}

/// The name of a descriptor's script, by identity.
fn script_name(script: &'static Script) -> &'static str {
    let scripts: [(&str, &'static Script); 9] = [
        ("INSPECT", &INSPECT),
        ("FORCE_UNLOCK", &FORCE_UNLOCK),
        ("SEM_AVAILABLE", &SEM_AVAILABLE),
        ("REDISSON_RW_INSPECT", &REDISSON_RW_INSPECT),
        ("REDISSON_FAIR_INSPECT", &REDISSON_FAIR_INSPECT),
        ("REDISSON_FAIR_FORCE", &REDISSON_FAIR_FORCE),
        ("REDISSON_SEM_INSPECT", &REDISSON_SEM_INSPECT),
        ("REDISSON_SEM_FORCE", &REDISSON_SEM_FORCE),
        ("REDISSON_SEM_HELD", &REDISSON_SEM_HELD),
    ];
    let found = scripts.iter().find(|(_, s)| std::ptr::eq(*s, script));
    found.map_or("an unknown script", |(name, _)| name)
}

/// Every layout, with its name.
const LAYOUTS: [(&str, &Layout); 7] = [
    ("HOLDLOCK", &layout::HOLDLOCK),
    ("HOLDLOCK_FAIR", &layout::HOLDLOCK_FAIR),
    ("HOLDLOCK_LEASES", &layout::HOLDLOCK_LEASES),
    ("REDISSON", &layout::REDISSON),
    ("REDISSON_RW", &layout::REDISSON_RW),
    ("REDISSON_FAIR", &layout::REDISSON_FAIR),
    ("REDISSON_SEM", &layout::REDISSON_SEM),
];

/// The name of a layout, by identity.
fn layout_name(layout: &'static Layout) -> &'static str {
    let found = LAYOUTS.iter().find(|(_, l)| std::ptr::eq(*l, layout));
    found.map_or("an unknown layout", |(name, _)| name)
}

fn yes(fact: bool) -> String {
    if fact { "yes" } else { "no" }.to_owned()
}

/// A descriptor's facts, by field, as the snapshot shows them (the script calls,
/// functions, are left out; `tests/scripts.rs` checks what each script does), with the
/// key of the lock `n` under the prefix `p:`.
fn facts(kind: Kind) -> Vec<(&'static str, String)> {
    let spec = kind.0;
    let names = (spec.layout.names)("p:", "n", kind.public().suffix(), kind).unwrap();
    let held = spec
        .held
        .map(|held| (script_name(held.script), (held.key)(&names)));
    let suffix = match spec.field_suffix {
        "" => "-",
        suffix => suffix,
    };
    vec![
        ("label", spec.label.to_owned()),
        ("describe", spec.describe.to_owned()),
        ("public", spec.public.as_str().to_owned()),
        ("exclusive", yes(spec.exclusive)),
        ("excludes_itself", yes(spec.excludes_itself)),
        ("field_suffix", suffix.to_owned()),
        ("filed_by_name", yes(spec.filed_by_name)),
        ("renewal", format!("{:?}", spec.renewal)),
        ("draws_tokens", yes(spec.draws_tokens)),
        (
            "other_side",
            spec.other_side.map_or("-", |side| side.label).to_owned(),
        ),
        ("counted", format!("{:?}", spec.counted)),
        (
            "held: script",
            held.as_ref().map_or("-", |held| held.0).to_owned(),
        ),
        (
            "held: key",
            held.map_or_else(|| "-".to_owned(), |held| held.1),
        ),
        ("batches", yes(spec.batches)),
        ("reenters_apart", yes(spec.reenters_apart)),
        ("queues_clients", yes(spec.queues_clients)),
        ("marks_waiting_writers", yes(spec.marks_waiting_writers)),
        ("hands_on_when_forced", yes(spec.hands_on_when_forced)),
        ("waits_alongside", yes(spec.waits_alongside)),
        ("waits_on_own_channel", yes(spec.waits_on_own_channel)),
        ("queues_each_wait", yes(spec.queues_each_wait)),
        ("owner_per_hold", yes(spec.owner_per_hold)),
        ("in_deadlock_checks", yes(spec.in_deadlock_checks)),
        ("holders_are_owner_ids", yes(spec.holders_are_owner_ids)),
        ("layout", layout_name(spec.layout).to_owned()),
        ("key", names.key.to_string()),
    ]
}

/// The facts of `kinds` as a grid: a row per field, a column per kind, each column as
/// wide as its widest fact. Begins with a newline, as the snapshots do.
fn grid(kinds: [Kind; 5]) -> String {
    let columns: Vec<_> = kinds.into_iter().map(facts).collect();
    let widths: Vec<usize> = columns
        .iter()
        .map(|column| column.iter().map(|(_, fact)| fact.len()).max().unwrap_or(0))
        .collect();
    let mut grid = String::from("\n");
    for (row, (field, _)) in columns[0].iter().enumerate() {
        let mut line = format!("{field:<22}");
        for (column, width) in columns.iter().zip(&widths) {
            line.push_str(&format!("{:<width$}  ", column[row].1));
        }
        grid.push_str(line.trim_end());
        grid.push('\n');
    }
    grid
}

/// A layout's facts, one a line, with the names of the lock `n` under the prefix `p:`
/// with the suffix `:s` and of keys beside the key `k`.
fn layout_facts(name: &str, layout: &'static Layout) -> String {
    let names = (layout.names)("p:", "n", ":s", Kind::FAIR).unwrap();
    let facts = [
        ("compat", format!("{:?}", layout.compat)),
        ("names: key", names.key.to_string()),
        ("token_key", (layout.token_key)("k")),
        ("release_channel", (layout.release_channel)("k")),
        ("beside", (layout.beside)("k", "x")),
        ("forced_messages", format!("{:?}", layout.forced_messages)),
        ("keeps_fields", yes(layout.keeps_fields)),
        (
            "operator_keys",
            format!("{:?}", (layout.operator_keys)("k")),
        ),
        ("inspect", script_name(layout.inspect).to_owned()),
        ("force", script_name(layout.force).to_owned()),
        ("forced_as_mutex", yes(layout.forced_as_mutex)),
        ("at_the_name", yes(layout.at_the_name)),
    ];
    let mut text = format!("{name}\n");
    for (field, fact) in facts {
        text.push_str(&format!("  {field:<17}{fact}\n"));
    }
    text
}

/// The descriptors of holdlock's layouts, a column per kind.
const HOLDLOCK_KINDS: &str = r#"
label                 mutex      fair           read             write            semaphore
describe              lock       fair lock      read lock        write lock       semaphore permit
public                mutex      fair           rw               rw               semaphore
exclusive             yes        yes            no               yes              no
excludes_itself       yes        yes            no               yes              yes
field_suffix          -          -              -                :w               -
filed_by_name         yes        no             no               no               no
renewal               Whole      Whole          PerHolder        PerHolder        PerHolder
draws_tokens          yes        yes            no               yes              no
other_side            -          -              write            read             -
counted               HashField  HashField      HashField        HashField        HashField
held: script          -          -              -                -                SEM_AVAILABLE
held: key             -          -              -                -                p:{n}:sem:leases
batches               yes        no             no               no               no
reenters_apart        yes        yes            no               no               no
queues_clients        yes        no             no               no               no
marks_waiting_writers no         no             no               yes              no
hands_on_when_forced  no         yes            no               no               no
waits_alongside       no         no             yes              no               no
waits_on_own_channel  no         no             no               no               no
queues_each_wait      no         yes            no               no               no
owner_per_hold        no         no             no               no               yes
in_deadlock_checks    yes        yes            yes              yes              no
holders_are_owner_ids yes        yes            yes              yes              no
layout                HOLDLOCK   HOLDLOCK_FAIR  HOLDLOCK_LEASES  HOLDLOCK_LEASES  HOLDLOCK_LEASES
key                   p:{n}      p:{n}:fair     p:{n}:rw         p:{n}:rw         p:{n}:sem
"#;

/// The descriptors of Redisson's layouts, a column per kind.
const REDISSON_KINDS: &str = r#"
label                 mutex      fair           read            write        semaphore
describe              lock       fair lock      read lock       write lock   semaphore permit
public                mutex      fair           rw              rw           semaphore
exclusive             yes        yes            no              yes          no
excludes_itself       yes        yes            no              yes          yes
field_suffix          -          -              -               :write       -
filed_by_name         yes        no             no              no           no
renewal               Whole      Whole          RedissonReader  Whole        RedissonPermit
draws_tokens          yes        no             no              no           no
other_side            -          -              write           read         -
counted               HashField  HashField      HashField       HashField    Deadline
held: script          -          -              -               -            REDISSON_SEM_HELD
held: key             -          -              -               -            {p:n}:timeout
batches               no         no             no              no           no
reenters_apart        yes        yes            no              no           no
queues_clients        no         no             no              no           no
marks_waiting_writers no         no             no              no           no
hands_on_when_forced  no         no             no              no           no
waits_alongside       no         no             yes             no           no
waits_on_own_channel  no         yes            no              no           no
queues_each_wait      no         no             no              no           no
owner_per_hold        no         no             no              no           yes
in_deadlock_checks    yes        yes            yes             yes          no
holders_are_owner_ids yes        yes            yes             yes          no
layout                REDISSON   REDISSON_FAIR  REDISSON_RW     REDISSON_RW  REDISSON_SEM
key                   p:n        p:n            p:n             p:n          p:n
"#;

/// The layouts the descriptors name.
const LAYOUT_FACTS: &str = r#"
HOLDLOCK
  compat           Holdlock
  names: key       p:{n}:s
  token_key        k:token
  release_channel  k:released
  beside           k:x
  forced_messages  []
  keeps_fields     yes
  operator_keys    []
  inspect          INSPECT
  force            FORCE_UNLOCK
  forced_as_mutex  no
  at_the_name      no
HOLDLOCK_FAIR
  compat           Holdlock
  names: key       p:{n}:s
  token_key        k:token
  release_channel  k:released
  beside           k:x
  forced_messages  []
  keeps_fields     yes
  operator_keys    ["k:queue", "k:alive"]
  inspect          INSPECT
  force            FORCE_UNLOCK
  forced_as_mutex  no
  at_the_name      no
HOLDLOCK_LEASES
  compat           Holdlock
  names: key       p:{n}:s
  token_key        k:token
  release_channel  k:released
  beside           k:x
  forced_messages  []
  keeps_fields     yes
  operator_keys    ["k:leases"]
  inspect          INSPECT
  force            FORCE_UNLOCK
  forced_as_mutex  no
  at_the_name      no
REDISSON
  compat           Redisson
  names: key       p:n
  token_key        redisson_lock_token:{k}
  release_channel  redisson_lock__channel:{k}
  beside           {k}:x
  forced_messages  ["0"]
  keeps_fields     no
  operator_keys    []
  inspect          INSPECT
  force            FORCE_UNLOCK
  forced_as_mutex  yes
  at_the_name      yes
REDISSON_RW
  compat           Redisson
  names: key       p:n
  token_key        redisson_lock_token:{k}
  release_channel  redisson_rwlock:{k}
  beside           {k}:x
  forced_messages  ["1", "0"]
  keeps_fields     no
  operator_keys    []
  inspect          REDISSON_RW_INSPECT
  force            FORCE_UNLOCK
  forced_as_mutex  yes
  at_the_name      yes
REDISSON_FAIR
  compat           Redisson
  names: key       p:n
  token_key        redisson_lock_token:{k}
  release_channel  redisson_lock__channel:{k}
  beside           {k}:x
  forced_messages  []
  keeps_fields     no
  operator_keys    ["redisson_lock_queue:{k}", "redisson_lock_timeout:{k}"]
  inspect          REDISSON_FAIR_INSPECT
  force            REDISSON_FAIR_FORCE
  forced_as_mutex  yes
  at_the_name      no
REDISSON_SEM
  compat           Redisson
  names: key       p:n
  token_key        redisson_lock_token:{k}
  release_channel  redisson_sc:{k}
  beside           {k}:x
  forced_messages  []
  keeps_fields     no
  operator_keys    ["{k}:timeout"]
  inspect          REDISSON_SEM_INSPECT
  force            REDISSON_SEM_FORCE
  forced_as_mutex  yes
  at_the_name      yes
"#;

/// Every descriptor and layout, compared with the snapshots above: a change to the
/// table shows here as the rows it changed. (On a failure the whole table is printed,
/// ready to be pasted in once the change is meant.)
#[test]
fn the_table_of_kinds_is_as_written() {
    let holdlock = grid(kinds_of(Compat::Holdlock));
    let redisson = grid(kinds_of(Compat::Redisson));
    let mut layouts = String::from("\n");
    for (name, layout) in LAYOUTS {
        layouts.push_str(&layout_facts(name, layout));
    }
    println!("{holdlock}{redisson}{layouts}");
    assert_eq!(holdlock, HOLDLOCK_KINDS);
    assert_eq!(redisson, REDISSON_KINDS);
    assert_eq!(layouts, LAYOUT_FACTS);
}
