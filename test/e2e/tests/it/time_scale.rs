//! The demo's and the benchmark's `--time-scale` accept what the
//! controller's `--time-scale` accepts: the scale is passed on to it; and
//! the demo's other numbers are refused for their range.

use capmox_controller::manager::flags;
use capmox_e2e::env;

#[test]
fn the_time_scale_bounds_are_the_controllers() {
    assert_eq!(env::MAX_TIME_SCALE, flags::MAX_TIME_SCALE);
    for s in [
        "0.005", "0.25", "1", "100", "100.5", "0", "-1", "inf", "NaN", "abc", "", " ",
    ] {
        assert_eq!(
            env::parse_time_scale(s).is_ok(),
            flags::parse_time_scale(s).is_ok(),
            "{s}"
        );
    }
}

/// A negative `--workers` is refused for its range (clap would otherwise
/// read `-1` as an unknown flag), before anything starts.
#[test]
fn the_demo_refuses_negative_workers_for_their_range() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--workers", "-1"])
        .output()
        .expect("run the demo binary");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-1 is not in 0..=100"), "{err}");
}
