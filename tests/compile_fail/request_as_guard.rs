// Code generic over guards gets a request instead of a guard.
fn keep<G: holdlock::Held>(guard: G) -> G {
    guard
}

fn take(client: holdlock::LockClient) {
    let _ = keep(client.lock("account:42"));
}

fn main() {}
