// The body of `run` gets the guard in an `Arc`, not by reference.
async fn section(client: holdlock::LockClient) -> holdlock::Result<u32> {
    client
        .lock("account:42")
        .run(|guard: &holdlock::LockGuard| async move { guard.hold_count() })
        .await
}

fn main() {}
