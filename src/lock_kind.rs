//! The kinds of lock, as the public API names them (see `keys.rs` for their keys).

/// The kinds of lock, as the operator calls take them
/// ([`LockClient::inspect_kind`](crate::LockClient::inspect_kind),
/// [`LockClient::force_unlock_kind`](crate::LockClient::force_unlock_kind)) and a
/// [`LockInfo`](crate::LockInfo) names them. Each kind keeps its own keys, so a
/// mutex, a fair lock, a read-write lock and a semaphore may share a name without
/// meeting. Written (`Display`, `FromStr`, serde) as `mutex`, `fair`, `rw` and
/// `semaphore`.
///
/// # Examples
/// ```
/// use holdlock::LockKind;
///
/// let kind: LockKind = "rw".parse()?;
/// assert_eq!(kind, LockKind::ReadWrite);
/// assert_eq!(kind.to_string(), "rw");
/// assert_eq!(LockKind::default(), LockKind::Mutex);
/// assert_eq!(LockKind::ALL.len(), 4);
/// assert!("rwlock".parse::<LockKind>().is_err());
/// # Ok::<(), holdlock::LockError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum LockKind {
    /// The reentrant lock of [`LockClient::lock`](crate::LockClient::lock), hash
    /// `P{N}`.
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "mutex"))]
    Mutex,
    /// The first-come-first-served lock of
    /// [`LockClient::fair_lock`](crate::LockClient::fair_lock), hash `P{N}:fair`
    /// with its queue.
    #[cfg_attr(feature = "serde", serde(rename = "fair"))]
    Fair,
    /// The read-write lock of [`LockClient::read_lock`](crate::LockClient::read_lock)
    /// and [`write_lock`](crate::LockClient::write_lock), hash `P{N}:rw`.
    #[cfg_attr(feature = "serde", serde(rename = "rw"))]
    ReadWrite,
    /// The semaphore of [`LockClient::semaphore`](crate::LockClient::semaphore), hash
    /// `P{N}:sem`.
    #[cfg_attr(feature = "serde", serde(rename = "semaphore"))]
    Semaphore,
}

impl LockKind {
    /// Every kind, in the order listings sort them.
    ///
    /// # Examples
    /// ```
    /// let names: Vec<&str> = holdlock::LockKind::ALL.iter().map(|k| k.as_str()).collect();
    /// assert_eq!(names, ["mutex", "fair", "rw", "semaphore"]);
    /// ```
    pub const ALL: [LockKind; 4] = [
        LockKind::Mutex,
        LockKind::Fair,
        LockKind::ReadWrite,
        LockKind::Semaphore,
    ];

    /// The kind's name: `mutex`, `fair`, `rw` or `semaphore` (the CLI's `--kind`, the
    /// JSON's `kind`).
    ///
    /// # Examples
    /// ```
    /// assert_eq!(holdlock::LockKind::Semaphore.as_str(), "semaphore");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Fair => "fair",
            LockKind::ReadWrite => "rw",
            LockKind::Semaphore => "semaphore",
        }
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
