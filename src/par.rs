//! Order-keeping parallel map over the machine's cores, for the per-file and per-node work
//! that dominates large runs (YAML parsing, rendering). Results come back in input order, so
//! output and the first reported error stay deterministic.

/// `f` applied to every item, on up to `available_parallelism` threads, results in input
/// order. Items are dealt round-robin so neighbouring (similar-sized) items share the load.
/// The calling thread takes the first share itself: one thread fewer to start, and the memory
/// its share frees stays with the thread that goes on (a per-thread allocator keeps what
/// another thread freed to itself). A panic in a worker is a bug and is re-raised on the
/// calling thread.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
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

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_input_order() {
        let items: Vec<u32> = (0..1000).collect();
        let out = super::map(&items, |i| i * 2);
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u32], |i| *i).is_empty());
    }
}
