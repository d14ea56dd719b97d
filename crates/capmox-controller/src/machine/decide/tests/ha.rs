//! The HA stop deadline of a deletion (docs/field-cases.md B33,
//! docs/ha.md), walked through on a simulated clock.

use std::time::Duration;

use super::fixtures::*;
use super::*;
use crate::pve::HaState;

/// Deleting a running VM that HA manages (not by our record) whose HA
/// resource was asked to stop: the deletion's age as the clock says.
fn asked_to_stop(age: Duration) -> Facts {
    let mut f = at(VmFact::Ours(VmView {
        ha: Some(HaState::Stopped),
        ..view(None, Power::Running)
    }));
    f.deleting = true;
    f.provisioned = true;
    f.deletion_age = Some(age);
    f
}

/// A reconcile every 10 simulated seconds for 7 minutes: the machine waits
/// (`WaitingForHAStop`, looked at again soon) for the first 5 minutes, from
/// minute 5 on the deletion has failed (`DeletionFailed`) with a message
/// that names the HA resource, the 300 s deadline and what the operator
/// does; the running VM is never destroyed. Once it stopped, it is.
#[test]
fn after_five_minutes_of_waiting_for_an_ha_stop_the_deletion_has_failed() {
    let five_minutes = Duration::from_secs(5 * 60);
    let mut waited = 0;
    let mut failed = 0;
    for tick in 0..=42u64 {
        let age = Duration::from_secs(tick * 10);
        let Step::Wait(w) = decide(&asked_to_stop(age)) else {
            panic!("at {age:?}: a running VM must not be acted on");
        };
        let (code, message) = (w.reason.code(), w.reason.message());
        if age < five_minutes {
            assert_eq!(code, "WaitingForHAStop", "at {age:?}: {message}");
            assert_eq!(w.until, Until::Soon, "at {age:?}");
            assert!(message.contains("VM 131"), "{message}");
            waited += 1;
            continue;
        }
        assert_eq!(code, "DeletionFailed", "at {age:?}: {message}");
        for part in [
            "HA resource vm:131",
            &format!("{}s after the deletion began", tick * 10),
            "deadline 300s",
            "ha-manager status",
            "ha-manager set vm:131 --state stopped",
            "never destroyed",
        ] {
            assert!(
                message.contains(part),
                "at {age:?}, {part:?} missing: {message}"
            );
        }
        assert!(
            matches!(w.until, Until::Retry(d) if d >= Duration::from_secs(10)),
            "at {age:?}: {:?}",
            w.until
        );
        failed += 1;
    }
    // Ticks 0..=29 (0 s to 290 s) wait; 30..=42 (300 s to 420 s) have failed.
    assert_eq!((waited, failed), (30, 13));
    // The operator stops it (or HA does, late): the deletion goes on.
    let mut f = asked_to_stop(Duration::from_secs(7 * 60));
    f.apply(Observed::Power(Power::Stopped));
    assert_eq!(decide(&f), Step::Destroy);
}
