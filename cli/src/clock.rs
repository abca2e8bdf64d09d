//! Time on the command line: durations parsed from arguments (`30s`, `2m`, `500ms`) and the
//! wall clock in milliseconds (message timestamps, generated topic names).

/// Parses a duration such as `30s`, `2m`, `500ms`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (e.g. 30s, 2m, 500ms)"))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
