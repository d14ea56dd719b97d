//! The demo's and the benchmark's `--time-scale` accept what the
//! controller's `--time-scale` accepts: the scale is passed on to it.

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
