//! Keeps the tests that load the machine on purpose away from the tests
//! that need it responsive.
//!
//! All end-to-end tests run on the threads of one process, each beside
//! whatever others the harness picked. Most do not care. A few depend on
//! getting the CPU within a short window — a key typed in a pseudo-terminal
//! while an answer streams must arrive before the answer ends — and a few
//! load every core on purpose: a fork bomb, compiling a project with a
//! language's toolchain. Such a test takes a pass at its start, before
//! anything else: [`needs_a_responsive_machine`] or [`loads_the_machine`].
//! Tests of the same kind run together as before; the two kinds never
//! overlap. A test takes one pass only (a second could wait for itself).

use std::sync::{Condvar, Mutex, MutexGuard};

/// The two kinds of tests that must not overlap.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Responsive,
    Loading,
}

impl Kind {
    fn index(self) -> usize {
        match self {
            Kind::Responsive => 0,
            Kind::Loading => 1,
        }
    }

    fn other(self) -> Kind {
        match self {
            Kind::Responsive => Kind::Loading,
            Kind::Loading => Kind::Responsive,
        }
    }
}

/// Which kind runs now and how many of it; how many of each wait.
struct State {
    running: Option<(Kind, usize)>,
    waiting: [usize; 2],
}

static STATE: Mutex<State> = Mutex::new(State {
    running: None,
    waiting: [0, 0],
});
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    // A test that failed while holding the lock left the counts whole.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test for as long as it runs; lets the other kind in when the
/// last test of its kind drops it (also when the test fails).
#[must_use = "the pass holds off the other kind of test only while it lives"]
pub struct Pass {
    kind: Kind,
}

fn enter(kind: Kind) -> Pass {
    let mut state = state();
    state.waiting[kind.index()] += 1;
    loop {
        // A kind that is waiting goes first once the running one drains,
        // so neither kind can keep the other out for the whole run.
        let may_enter = match state.running {
            None => true,
            Some((running, _)) => running == kind && state.waiting[kind.other().index()] == 0,
        };
        if may_enter {
            break;
        }
        state = CHANGED.wait(state).unwrap_or_else(|e| e.into_inner());
    }
    state.waiting[kind.index()] -= 1;
    let count = state.running.map_or(0, |(_, count)| count);
    state.running = Some((kind, count + 1));
    Pass { kind }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut state = state();
        state.running = match state.running {
            Some((kind, count)) if kind == self.kind && count > 1 => Some((kind, count - 1)),
            _ => None,
        };
        CHANGED.notify_all();
    }
}

/// For a test whose outcome depends on being scheduled promptly (keys
/// typed into a pseudo-terminal at the right moment): no test that loads
/// the machine runs while it does.
pub fn needs_a_responsive_machine() -> Pass {
    enter(Kind::Responsive)
}

/// For a test that keeps every core busy on purpose (a fork bomb, a
/// toolchain compiling a project): it runs only while no test that needs
/// a responsive machine does.
pub fn loads_the_machine() -> Pass {
    enter(Kind::Loading)
}
