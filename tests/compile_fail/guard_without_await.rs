// A request is not its guard: it must be awaited.
async fn take(client: holdlock::LockClient) {
    let guard: holdlock::LockGuard = client.lock("account:42");
    drop(guard);
}

fn main() {}
