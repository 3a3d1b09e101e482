//! Order-keeping parallel map over the machine's cores, for the per-file and per-node work
//! that dominates large runs (YAML parsing, rendering). Results come back in input order, so
//! output and the first reported error stay deterministic.

#![allow(clippy::disallowed_methods, reason = "the one place that spreads work over threads")]

/// `work(0)`, …, `work(n - 1)` on every core, in order: the spread function the core's
/// per-group work takes from its caller (`inventory::build_spread`, `readiness::evaluate_spread`).
pub fn spread<R: Send>(n: usize, work: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
    let items: Vec<usize> = (0..n).collect();
    map(&items, |i| work(*i))
}

/// `a` on a thread of its own while the calling thread runs `b`: two slow, unlike queries
/// asked at once. `None` for `a` when it panicked (a bug), so the caller can say so.
pub fn join<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (Option<A>, B) {
    std::thread::scope(|scope| {
        let first = scope.spawn(a);
        let second = b();
        (first.join().ok(), second)
    })
}

/// `f` applied to every item, on up to `available_parallelism` threads, results in input
/// order. Items are dealt round-robin so neighbouring (similar-sized) items share the load.
/// The calling thread takes the first share itself: one thread fewer to start, and the memory
/// its share frees stays with the thread that goes on (a per-thread allocator keeps what
/// another thread freed to itself). A panic in a worker is a bug and is re-raised on the
/// calling thread.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len()).max(1);
    if workers == 1 {
        return items.iter().map(f).collect();
    }
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let f = &f;
    let share = move |w: usize| -> Vec<(usize, R)> {
        items.iter().enumerate().skip(w).step_by(workers).map(|(i, t)| (i, f(t))).collect()
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (1..workers).map(|w| scope.spawn(move || share(w))).collect();
        let own = share(0);
        for (i, r) in own {
            slots[i] = Some(r);
        }
        for h in handles {
            for (i, r) in h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)) {
                slots[i] = Some(r);
            }
        }
    });
    slots.into_iter().flatten().collect()
}

/// `f` applied to `items` chunk by chunk on up to `available_parallelism` threads, each result
/// handed to `consume` on the calling thread, in chunk order, while later chunks are still
/// being worked on: for work whose results must be taken in order (a fold over events) but
/// whose production (reading, parsing) is the cost. Workers run at most two chunks ahead, so
/// memory stays bounded. A panic in a worker is re-raised on the calling thread.
pub fn for_each_ordered<T: Sync, R: Send>(
    items: &[T],
    chunk: usize,
    f: impl Fn(&[T]) -> R + Sync,
    mut consume: impl FnMut(R),
) {
    let chunks: Vec<&[T]> = items.chunks(chunk.max(1)).collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(chunks.len()).max(1);
    if workers == 1 {
        chunks.into_iter().map(&f).for_each(consume);
        return;
    }
    let f = &f;
    let chunks = &chunks;
    std::thread::scope(|scope| {
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = std::sync::mpsc::sync_channel(2);
            receivers.push(rx);
            handles.push(scope.spawn(move || {
                for c in chunks.iter().skip(w).step_by(workers) {
                    if tx.send(f(c)).is_err() {
                        return;
                    }
                }
            }));
        }
        for i in 0..chunks.len() {
            match receivers[i % workers].recv() {
                Ok(r) => consume(r),
                // The worker panicked: stop taking results and re-raise below.
                Err(_) => break,
            }
        }
        drop(receivers);
        for h in handles {
            h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_input_order() {
        let items: Vec<u32> = (0..1000).collect();
        let out = super::map(&items, |i| i * 2);
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u32], |i| *i).is_empty());
    }

    #[test]
    fn ordered_chunks_are_consumed_in_order() {
        let items: Vec<u32> = (0..10_000).collect();
        let mut seen = Vec::new();
        super::for_each_ordered(
            &items,
            7,
            |c| c.iter().map(|i| i * 3).collect::<Vec<_>>(),
            |r| seen.extend(r),
        );
        assert_eq!(seen, items.iter().map(|i| i * 3).collect::<Vec<_>>());
        let mut none = 0;
        super::for_each_ordered(&[] as &[u32], 7, |c| c.len(), |_| none += 1);
        assert_eq!(none, 0);
    }
}
