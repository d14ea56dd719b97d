//! Field helpers of the conversions: paths, whole numbers between the two
//! versions' integer types, and the refusal of a field.

use super::ConversionError;

/// `at.name` (`spec` + `zoneConfig` → `spec.zoneConfig`).
pub(super) fn join(at: &str, name: &str) -> String {
    format!("{at}.{name}")
}

/// `at[i]`.
pub(super) fn item(at: &str, i: usize) -> String {
    format!("{at}[{i}]")
}

/// A `v1alpha2` field `v1alpha3` has no counterpart for, with why.
pub(super) fn refuse<T>(at: &str, why: &str) -> Result<T, ConversionError> {
    Err(ConversionError::new(
        at,
        format!("has no v1alpha3 equivalent: {why} (docs/migrating-from-capmox.md)"),
    ))
}

fn fit<T: TryFrom<i64>>(v: i64, max: u64, at: &str) -> Result<T, ConversionError> {
    T::try_from(v).map_err(|_| {
        ConversionError::new(
            at,
            format!("{v} is outside 0..={max}, the range v1alpha3 holds"),
        )
    })
}

/// A `v1alpha2` integer as `u8`.
pub(super) fn to_u8(v: impl Into<i64>, at: &str) -> Result<u8, ConversionError> {
    fit(v.into(), u8::MAX.into(), at)
}

/// A `v1alpha2` integer as `u16`.
pub(super) fn to_u16(v: impl Into<i64>, at: &str) -> Result<u16, ConversionError> {
    fit(v.into(), u16::MAX.into(), at)
}

/// A `v1alpha2` integer as `u32`.
pub(super) fn to_u32(v: impl Into<i64>, at: &str) -> Result<u32, ConversionError> {
    fit(v.into(), u32::MAX.into(), at)
}

/// An optional `v1alpha2` integer as `u32`.
pub(super) fn opt_u32(v: Option<impl Into<i64>>, at: &str) -> Result<Option<u32>, ConversionError> {
    v.map(|v| to_u32(v, at)).transpose()
}

/// A `v1alpha3` number as the Go provider's `int32`; `None` when it does not
/// fit (the value is then kept in the conversion data).
pub(super) fn to_i32(v: u32) -> Option<i32> {
    i32::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_do_not_fit_name_the_field_and_the_range() {
        assert_eq!(to_u8(128, "spec.ipv4Config.prefix"), Ok(128));
        assert_eq!(
            to_u8(300, "spec.ipv4Config.prefix"),
            Err(ConversionError::new(
                "spec.ipv4Config.prefix",
                "300 is outside 0..=255, the range v1alpha3 holds"
            ))
        );
        assert_eq!(
            to_u32(-1, "spec.numCores").unwrap_err().to_string(),
            "spec.numCores: -1 is outside 0..=4294967295, the range v1alpha3 holds"
        );
        assert_eq!(to_u16(4094, "x"), Ok(4094));
        assert!(to_u16(65536, "x").is_err());
        assert_eq!(to_i32(2_147_483_647), Some(i32::MAX));
        assert_eq!(to_i32(2_147_483_648), None);
    }
}
