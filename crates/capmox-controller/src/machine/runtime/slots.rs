//! Clone slots per (Proxmox cluster, template), with an adaptive window.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::ProxmoxMachine;
use crate::clients::Identity;

/// A template in one Proxmox cluster: the key of its clone slots.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TemplateKey {
    /// The Proxmox cluster.
    pub identity: Identity,
    /// The template's VMID.
    pub template: u32,
}

impl TemplateKey {
    /// The key of template `template` in `identity`.
    pub fn new(identity: &Identity, template: u32) -> TemplateKey {
        TemplateKey {
            identity: identity.clone(),
            template,
        }
    }
}

/// Clone slots per (identity, template VMID), with an adaptive window.
///
/// Proxmox runs clones of a stopped template in parallel (they share its
/// flock, docs/proxmox-semantics.md §6); what limits them is the storage: a storage
/// whose allocations queue behind a cluster-wide lock fails clones with
/// `got lock timeout` once too many wait. So the window starts at the
/// ceiling (`--clone-concurrency`), is halved (to at least 1) when a clone
/// of that template fails on a lock (multiplicative decrease), and grows by
/// one per clone that succeeds (additive increase) back to the ceiling —
/// TCP's congestion control, applied to clone storms.
///
/// Machines refused a slot wait in line, first come first served: a slot
/// that frees (a clone ended, the window grew) goes to the first in line,
/// whose machine is woken on the channel given to [`CloneSlots::new`]
/// instead of re-checking on a timer. A machine stays in line while it
/// keeps asking; one that has not asked for [`CloneSlots::stale_after`]
/// (it was placed elsewhere, paused, or failed) loses its place.
#[derive(Debug)]
pub struct CloneSlots {
    ceiling: usize,
    stale_after: Duration,
    state: Mutex<HashMap<TemplateKey, Slots>>,
    wake: Option<mpsc::Sender<ObjectRef<ProxmoxMachine>>>,
}

#[derive(Debug)]
struct Slots {
    held: BTreeSet<String>,
    window: usize,
    line: VecDeque<InLine>,
}

#[derive(Debug)]
struct InLine {
    owner: String,
    machine: ObjectRef<ProxmoxMachine>,
    asked: Instant,
}

impl Slots {
    fn free(&self) -> usize {
        self.window.saturating_sub(self.held.len())
    }

    fn prune(&mut self, stale_after: Duration) {
        let now = Instant::now();
        self.line
            .retain(|w| now.saturating_duration_since(w.asked) < stale_after);
    }

    /// The machines in line that a free slot now awaits.
    fn next_up(&self) -> impl Iterator<Item = &ObjectRef<ProxmoxMachine>> {
        self.line.iter().take(self.free()).map(|w| &w.machine)
    }
}

/// The answer of [`CloneSlots::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotGrant {
    /// The slot is the caller's.
    Granted,
    /// The window is full (or the free slots go to machines that asked
    /// first): the caller is in line, `ahead` machines before it, and is
    /// woken when a slot is its own.
    InLine {
        /// Clones of the template running now.
        running: usize,
        /// Machines before the caller in line.
        ahead: usize,
    },
}

impl CloneSlots {
    /// Slots with a window of at most `ceiling` per template (at least 1).
    /// A machine in line loses its place when it has not asked for
    /// `stale_after`; machines whose slot frees are sent on `wake` (none
    /// when `None`: waiters then find out on their own re-check).
    pub fn new(
        ceiling: usize,
        stale_after: Duration,
        wake: Option<mpsc::Sender<ObjectRef<ProxmoxMachine>>>,
    ) -> CloneSlots {
        CloneSlots {
            ceiling: ceiling.max(1),
            stale_after,
            state: Mutex::new(HashMap::new()),
            wake,
        }
    }

    /// How long a machine keeps its place in line without asking again.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    fn with<T>(&self, key: &TemplateKey, f: impl FnOnce(&mut Slots) -> T) -> T {
        let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(Self::slots(&mut m, self.ceiling, key))
    }

    fn slots<'m>(
        m: &'m mut HashMap<TemplateKey, Slots>,
        ceiling: usize,
        key: &TemplateKey,
    ) -> &'m mut Slots {
        m.entry(key.clone()).or_insert_with(|| Slots {
            held: BTreeSet::new(),
            window: ceiling,
            line: VecDeque::new(),
        })
    }

    fn send(&self, machines: Vec<ObjectRef<ProxmoxMachine>>) {
        if let Some(tx) = &self.wake {
            for m in machines {
                // A full buffer drops the wake: the machine re-checks on
                // its own timer.
                let _ = tx.try_send(m);
            }
        }
    }

    /// Takes a slot for `owner` (idempotent), whose ProxmoxMachine is
    /// `machine`. Free slots go to the machines in line first, in the
    /// order they first asked; a caller that gets none joins (or keeps its
    /// place in) the line. The owner now asks for this template only, so
    /// it leaves every other line.
    pub fn acquire(
        &self,
        key: &TemplateKey,
        owner: &str,
        machine: &ObjectRef<ProxmoxMachine>,
    ) -> SlotGrant {
        let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for (k, s) in m.iter_mut() {
            if k != key {
                s.line.retain(|w| w.owner != owner);
            }
        }
        let s = Self::slots(&mut m, self.ceiling, key);
        if s.held.contains(owner) {
            return SlotGrant::Granted;
        }
        s.prune(self.stale_after);
        let place = s.line.iter().position(|w| w.owner == owner);
        let ahead = place.unwrap_or(s.line.len());
        if ahead < s.free() {
            if let Some(i) = place {
                s.line.remove(i);
            }
            s.held.insert(owner.to_string());
            return SlotGrant::Granted;
        }
        match place {
            Some(i) => s.line[i].asked = Instant::now(),
            None => s.line.push_back(InLine {
                owner: owner.to_string(),
                machine: machine.clone(),
                asked: Instant::now(),
            }),
        }
        SlotGrant::InLine {
            running: s.held.len(),
            ahead,
        }
    }

    /// Records a slot for a clone found running (after a restart), even
    /// beyond the window.
    pub fn adopt(&self, key: &TemplateKey, owner: &str) {
        self.with(key, |s| {
            s.held.insert(owner.to_string());
        });
    }

    /// Frees every slot `owner` holds and its places in line, and wakes
    /// the machines in line that the freed slots now await.
    pub fn release(&self, owner: &str) {
        let mut woken = Vec::new();
        {
            let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for s in m.values_mut() {
                s.line.retain(|w| w.owner != owner);
                if s.held.remove(owner) {
                    s.prune(self.stale_after);
                    woken.extend(s.next_up().cloned());
                }
            }
        }
        self.send(woken);
    }

    /// A clone of the template succeeded: the window grows by one (up to
    /// the ceiling), and a machine in line the new slot awaits is woken.
    pub fn succeeded(&self, key: &TemplateKey) {
        let ceiling = self.ceiling;
        let stale_after = self.stale_after;
        let woken: Vec<_> = self.with(key, |s| {
            s.window = (s.window + 1).min(ceiling);
            s.prune(stale_after);
            s.next_up().cloned().collect()
        });
        self.send(woken);
    }

    /// A clone of the template failed on a lock (`got lock timeout`): the
    /// window halves, counted from the clones running now (at least 1).
    /// Returns the new window.
    pub fn congested(&self, key: &TemplateKey) -> usize {
        self.with(key, |s| {
            s.window = (s.window.min(s.held.len().max(1)) / 2).max(1);
            s.window
        })
    }

    /// Slots in use for a template.
    pub fn in_use(&self, key: &TemplateKey) -> usize {
        self.with(key, |s| s.held.len())
    }

    /// Machines in line for a template (including any that stopped asking
    /// but have not yet lost their place).
    pub fn in_line(&self, key: &TemplateKey) -> usize {
        self.with(key, |s| s.line.len())
    }

    /// The current window of a template.
    pub fn window(&self, key: &TemplateKey) -> usize {
        self.with(key, |s| s.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> ObjectRef<ProxmoxMachine> {
        ObjectRef::new(name).within("ns")
    }

    fn slots(ceiling: usize) -> CloneSlots {
        CloneSlots::new(ceiling, Duration::from_secs(90), None)
    }

    fn k(id: &str, t: u32) -> TemplateKey {
        TemplateKey::new(&Identity::new(id), t)
    }

    fn granted(s: &CloneSlots, id: &str, t: u32, owner: &str) -> bool {
        s.acquire(&k(id, t), owner, &m(owner)) == SlotGrant::Granted
    }

    #[test]
    fn clone_slots_bound_per_template() {
        let s = slots(2);
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(granted(&s, "dc-a", 9000, "u1"), "idempotent");
        assert!(granted(&s, "dc-a", 9000, "u2"));
        assert!(!granted(&s, "dc-a", 9000, "u3"));
        assert!(granted(&s, "dc-a", 9001, "u3"), "another template");
        assert!(granted(&s, "dc-b", 9000, "u4"), "another Proxmox cluster");
        s.release("u1");
        assert!(
            granted(&s, "dc-a", 9000, "u5"),
            "u3 left this line when it got 9001"
        );
        s.adopt(&k("dc-a", 9000), "u9");
        assert_eq!(s.in_use(&k("dc-a", 9000)), 3);
    }

    #[test]
    fn clone_window_halves_on_lock_timeouts_and_grows_back() {
        let s = slots(8);
        for i in 0..8 {
            assert!(granted(&s, "dc-a", 9000, &format!("u{i}")));
        }
        assert!(!granted(&s, "dc-a", 9000, "u8"), "at the ceiling");
        // u0's clone failed on a lock (its slot is released first): 7
        // still run, so the window is 3.
        s.release("u0");
        assert_eq!(s.congested(&k("dc-a", 9000)), 3);
        assert!(!granted(&s, "dc-a", 9000, "u8"), "7 still running > 3");
        for i in 1..6 {
            s.release(&format!("u{i}"));
        }
        assert_eq!(s.in_use(&k("dc-a", 9000)), 2);
        assert!(granted(&s, "dc-a", 9000, "u8"));
        assert!(!granted(&s, "dc-a", 9000, "u9"));
        // Repeated timeouts never close the window.
        for _ in 0..10 {
            s.congested(&k("dc-a", 9000));
        }
        assert_eq!(s.window(&k("dc-a", 9000)), 1);
        // Successes grow it by one each, up to the ceiling.
        for _ in 0..20 {
            s.succeeded(&k("dc-a", 9000));
        }
        assert_eq!(s.window(&k("dc-a", 9000)), 8);
        // Other templates and clusters are untouched.
        assert_eq!(s.window(&k("dc-b", 9000)), 8);
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_first_in_line_and_wakes_it() {
        let (tx, mut rx) = mpsc::channel(16);
        let s = CloneSlots::new(2, Duration::from_secs(90), Some(tx));
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(granted(&s, "dc-a", 9000, "u2"));
        assert_eq!(
            s.acquire(&k("dc-a", 9000), "u3", &m("u3")),
            SlotGrant::InLine {
                running: 2,
                ahead: 0
            }
        );
        assert_eq!(
            s.acquire(&k("dc-a", 9000), "u4", &m("u4")),
            SlotGrant::InLine {
                running: 2,
                ahead: 1
            }
        );
        assert_eq!(
            s.acquire(&k("dc-a", 9000), "u3", &m("u3")),
            SlotGrant::InLine {
                running: 2,
                ahead: 0
            },
            "asking again keeps the place"
        );
        assert!(rx.try_recv().is_err(), "nothing freed yet");
        s.release("u1");
        assert_eq!(
            rx.try_recv().ok(),
            Some(m("u3")),
            "the first in line is woken"
        );
        assert!(rx.try_recv().is_err(), "only as many as slots freed");
        assert!(
            !granted(&s, "dc-a", 9000, "u5"),
            "a newcomer does not take the slot u3 was woken for"
        );
        assert!(!granted(&s, "dc-a", 9000, "u4"), "nor the second in line");
        assert!(granted(&s, "dc-a", 9000, "u3"));
        assert_eq!(s.in_line(&k("dc-a", 9000)), 2, "u4 and u5 wait");
        // The window grows after a success: the next in line is woken.
        s.congested(&k("dc-a", 9000));
        assert_eq!(s.window(&k("dc-a", 9000)), 1);
        s.succeeded(&k("dc-a", 9000));
        assert!(rx.try_recv().is_err(), "window 2, both held");
        s.release("u2");
        assert_eq!(rx.try_recv().ok(), Some(m("u4")));
        // A deleted machine leaves every line.
        s.release("u5");
        assert_eq!(s.in_line(&k("dc-a", 9000)), 1);
    }

    #[tokio::test]
    async fn a_machine_that_stopped_asking_loses_its_place() {
        let s = CloneSlots::new(1, Duration::from_millis(600), None);
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(!granted(&s, "dc-a", 9000, "gone"));
        assert!(!granted(&s, "dc-a", 9000, "u2"));
        s.release("u1");
        assert!(
            !granted(&s, "dc-a", 9000, "u2"),
            "gone asked just now: still first"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            granted(&s, "dc-a", 9000, "u2"),
            "gone has not asked for 700 ms"
        );
        assert_eq!(s.in_line(&k("dc-a", 9000)), 0);
    }
}
