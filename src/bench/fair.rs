//! W8: a semaphore of 5 permits under contention. (The fair lock's workloads are W3f
//! and W4f, in `workloads.rs`, and W9, in `crowd.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::workloads::Section;
use super::{Bench, BenchError, BenchResult, Figure, Goal, Settings, Unit, Workload};

/// W8: the semaphore's permits.
const PERMITS: u32 = 5;
/// How long a worker may take before the workload is deemed stuck.
const STUCK: Duration = Duration::from_secs(300);

impl Bench {
    /// W8: `workers` tasks over two clients each take a permit of one semaphore of 5
    /// `sections` times and hold it for `work` (1 ms). The floor is five times the
    /// serial ceiling of the same sections (take the bare lock, wait `work`, release)
    /// measured in this run: five bare locks kept busy back to back. The workers
    /// count the permits held at once (up after `acquire`, down before `release`, so
    /// never more than Redis grants); more than 5 fails the workload.
    pub(super) async fn semaphore(&self) -> BenchResult<Vec<Figure>> {
        let Settings {
            workers,
            sections,
            work,
            ..
        } = self.settings.clone();
        let total = workers as u64 * sections;
        let floor = self.serial_floor("w8", total, Section::Hold(work)).await?;
        let name = self.name("w8");
        let held = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let semaphore = self.clients[worker % 2].semaphore(name.clone(), PERMITS);
                let (held, most) = (Arc::clone(&held), Arc::clone(&most));
                let (done, progress) = (Arc::clone(&done), Arc::clone(&self.progress));
                tokio::spawn(async move {
                    for _ in 0..sections {
                        let permit = semaphore.acquire().await?;
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if now > PERMITS {
                            return Err(
                                format!("W8: {now} of {PERMITS} permits held at once").into()
                            );
                        }
                        tokio::time::sleep(work).await;
                        held.fetch_sub(1, Ordering::SeqCst);
                        permit.release().await?;
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 500 == 0 {
                            progress(Workload::W8, finished, total);
                        }
                    }
                    Ok::<_, BenchError>(())
                })
            })
            .collect();
        for handle in handles {
            tokio::time::timeout(STUCK, handle)
                .await
                .map_err(|_| "W8: a worker is stuck")???;
        }
        let rate = total as f64 / started.elapsed().as_secs_f64();
        Ok(vec![
            Figure::new(Workload::W8, "acquisitions/s", rate, Unit::PerSecond)
                .floor("5 x bare lock, one task", f64::from(PERMITS) * floor.rate())
                .goal(Goal::RatioAtLeast(0.8)),
            Figure::new(
                Workload::W8,
                "most permits held at once",
                f64::from(most.load(Ordering::SeqCst)),
                Unit::Count,
            )
            .goal(Goal::AtMost(f64::from(PERMITS))),
        ])
    }
}
