//! The Java Redisson peer's jar (`tests/interop-java`), for the tests that run Java
//! Redisson: built with Maven once per test process, and under a lock file once across
//! processes, when it is missing or older than its sources. Without a JDK 17 or Maven
//! the tests fail with a message that says what to install (never skipped silently).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// What to install when the Java toolchain is missing.
pub const INSTALL: &str = "the Java Redisson tests run Java Redisson: install a JDK 17 and \
                           Maven (`apt-get install openjdk-17-jdk-headless maven`)";

pub fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop-java")
}

/// The peer's runnable jar, built once per test process (and under a lock file, once
/// across processes) when it is missing or older than the peer's sources.
pub fn peer_jar() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            check_java();
            let dir = peer_dir();
            let jar = dir.join("target/redisson-peer.jar");
            if !stale(&jar) {
                return jar;
            }
            let _lock = BuildLock::take();
            if !stale(&jar) {
                return jar;
            }
            let built = Command::new("mvn")
                .args(["-q", "-B", "package", "-DskipTests"])
                .current_dir(&dir)
                .output()
                .unwrap_or_else(|e| panic!("{INSTALL}; running `mvn` failed: {e}"));
            assert!(
                built.status.success() && jar.is_file(),
                "`mvn -q -B package -DskipTests` in {} failed (Maven Central must be \
                 reachable on the first build):\n{}{}",
                dir.display(),
                String::from_utf8_lossy(&built.stdout),
                String::from_utf8_lossy(&built.stderr),
            );
            jar
        })
        .clone()
}

/// Fails, saying what to install, unless `java` (17 or later) and `mvn` run.
fn check_java() {
    let java = Command::new("java")
        .arg("-version")
        .output()
        .unwrap_or_else(|e| panic!("{INSTALL}; `java` could not be run: {e}"));
    // `openjdk version "17.0.15" 2025-04-15` (or `"1.8.0_392"` for Java 8).
    let said = String::from_utf8_lossy(&java.stderr);
    let version = said.split('"').nth(1).unwrap_or_default();
    let mut parts = version.split(['.', '-', '+', '_']);
    let major = match parts.next() {
        Some("1") => parts.next(),
        first => first,
    };
    let major: u32 = major.and_then(|m| m.parse().ok()).unwrap_or(0);
    assert!(
        java.status.success() && major >= 17,
        "{INSTALL}; `java -version` says:\n{said}"
    );
    let maven = Command::new("mvn")
        .arg("-v")
        .output()
        .unwrap_or_else(|e| panic!("{INSTALL}; `mvn` could not be run: {e}"));
    assert!(maven.status.success(), "{INSTALL}; `mvn -v` failed");
}

/// Whether `jar` is missing or older than a file of the peer's project.
fn stale(jar: &Path) -> bool {
    let Ok(built) = jar.metadata().and_then(|m| m.modified()) else {
        return true;
    };
    let dir = peer_dir();
    let mut sources = vec![dir.join("pom.xml")];
    let mut dirs = vec![dir.join("src")];
    while let Some(next) = dirs.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                sources.push(path);
            }
        }
    }
    sources.iter().any(|source| {
        source
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified > built)
    })
}

/// A lock file held while Maven builds the peer, so that test processes running at
/// once do not build into one `target/` together. One left by a build that was killed
/// is taken over after five minutes.
struct BuildLock(PathBuf);

impl BuildLock {
    fn take() -> Self {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-java.build.lock");
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Self(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = path
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|modified| modified.elapsed().ok());
                    if age.is_some_and(|age| age > Duration::from_secs(300)) {
                        let _ = std::fs::remove_file(&path);
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                Err(e) => panic!("cannot create {}: {e}", path.display()),
            }
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
