//! `melctl verify OUT`: whether a folder's splits are one whole set, in words or JSON.

use anyhow::Result;
use melkit::read::verify::{FolderCheck, verify_folder};

use crate::cli::VerifyArgs;

/// Prints the verdict; exit 0 when the set is whole, else 1 with each problem on stderr.
pub fn run(args: &VerifyArgs) -> Result<u8> {
    let check = verify_folder(&args.out)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&check.to_json())?);
    } else {
        out!("{}", text(&check));
    }
    for problem in &check.problems {
        errln!("error: {problem}");
    }
    Ok(if check.is_whole() { 0 } else { 1 })
}

/// One line per split, then the verdict.
fn text(check: &FolderCheck) -> String {
    let mut out = String::new();
    for s in &check.splits {
        let state = match (&s.problem, s.clips) {
            (Some(_), _) => "NOT USABLE (below)".to_string(),
            (None, Some(n)) => format!("{n} clips, ok"),
            (None, None) => "ok".to_string(),
        };
        out += &format!(
            "{:<12} {:<40} {state}\n",
            crate::term::visible(&s.name),
            crate::term::visible(&s.output.display().to_string())
        );
    }
    let build = check.build.as_deref().unwrap_or("(no build record)");
    out += &if check.is_whole() {
        format!("whole: {} splits of build {build}\n", check.splits.len())
    } else {
        format!("not whole: {} problem(s)\n", check.problems.len())
    };
    out
}
