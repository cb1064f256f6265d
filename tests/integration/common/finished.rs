//! How a program a test ran ended: its exit code and what it wrote.

/// How a program ended.
pub struct Finished {
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Finished {
    /// The exit code and both outputs, for an assertion message.
    pub fn describe(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}
