// A spawned critical section cannot borrow the caller's locals: move them in.
async fn spawned(client: holdlock::LockClient) {
    let ledger = String::from("ledger");
    let task = tokio::spawn(client.lock("account:42").run(async |_| ledger.len()));
    drop(task);
}

fn main() {}
