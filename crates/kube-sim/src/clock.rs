//! Wall-clock helpers: RFC 3339 timestamps as Kubernetes writes them (`metav1.Time`,
//! second precision, `Z`) and `kubectl`'s human-readable ages ("5m", "3h20m").

use k8s_openapi::jiff::Timestamp;
use std::time::{SystemTime, UNIX_EPOCH};

/// The current time in whole seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Formats seconds since the epoch as `2024-01-02T03:04:05Z` (`metav1.Time`).
pub fn rfc3339(unix_seconds: i64) -> String {
    match Timestamp::from_second(unix_seconds) {
        Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_string(),
    }
}

/// The current time as `metav1.Time`.
pub fn now_rfc3339() -> String {
    rfc3339(now_unix())
}

/// Parses an RFC 3339 timestamp to seconds since the epoch.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    s.parse::<Timestamp>().ok().map(|t| t.as_second())
}

/// `kubectl`'s `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration) for a
/// number of seconds: `"<invalid>"` below -1 s, `"0s"` below 0, `"90s"` below 2 min,
/// `"5m3s"` below 10 min, `"45m"` below 3 h, `"3h20m"` below 8 h, `"20h"` below 48 h,
/// `"3d4h"` below 8 days, `"40d"` below 2 years, `"3y20d"` below 8 years, then `"9y"`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp as `kubectl` shows it, or `"<unknown>"`.
pub fn age(timestamp: &str) -> String {
    match parse_rfc3339(timestamp) {
        Some(t) => human_duration(now_unix() - t),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_and_a_known_instant() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        // 2024-02-29T12:34:56Z, computed with `date -u -d @1709210096`.
        assert_eq!(rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(parse_rfc3339("2024-02-29T12:34:56Z"), Some(1_709_210_096));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(-5), "<invalid>");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(0), "0s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(120), "2m");
        assert_eq!(human_duration(303), "5m3s");
        assert_eq!(human_duration(45 * 60), "45m");
        assert_eq!(human_duration(3 * 3600 + 20 * 60), "3h20m");
        assert_eq!(human_duration(5 * 3600), "5h");
        assert_eq!(human_duration(20 * 3600), "20h");
        assert_eq!(human_duration(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(human_duration(40 * 86400), "40d");
        assert_eq!(human_duration((3 * 365 + 20) * 86400), "3y20d");
        assert_eq!(human_duration(9 * 365 * 86400), "9y");
    }
}
