//! The chat page and the npm package files it loads (`--serve`).
//!
//! No file-serving library fits a blocking server of one request per
//! connection, and the rule here is narrower than theirs: a request names a
//! file by an allow list, never by a path to resolve. It must sit under
//! `chat/`, `src/` or `dist/`, spelled in `A-Z a-z 0-9 . _ - /` only (so no
//! percent-escape, backslash or drive letter), with no empty, `.` or `..`
//! segment nor any segment starting with a dot, and end in one of a few
//! known extensions. Then the file, with symbolic links resolved, must still
//! lie inside the served folder.

use std::io;
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use crate::http::{refuse, respond, Head};

/// The largest static file served, in bytes.
const MAX_FILE: u64 = 8 << 20;
/// The folders of the npm package that may be served.
const SERVED_DIRS: [&str; 3] = ["chat/", "src/", "dist/"];

/// Answers a `GET` or `HEAD` of `path` from the folder `root`.
pub(crate) fn serve(mut stream: TcpStream, root: &Path, peer: &str, head: &Head, path: &str) -> io::Result<()> {
    let Some((file, content_type)) = resolve(root, path) else {
        return refuse(&mut stream, peer, Some(head), 404, "not found");
    };
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() && m.len() <= MAX_FILE => {
            let body = std::fs::read(&file)?;
            let body = if head.method == "HEAD" { &[][..] } else { &body[..] };
            respond(&mut stream, 200, content_type, body)
        }
        _ => refuse(&mut stream, peer, Some(head), 404, "not found"),
    }
}

/// The file a request path names, and its content type; `None` for any
/// path outside the allow list or outside `root`.
fn resolve(root: &Path, path: &str) -> Option<(PathBuf, &'static str)> {
    let relative = if path == "/" { "chat/index.html" } else { path.strip_prefix('/')? };
    let allowed_dir = SERVED_DIRS.iter().any(|d| relative.starts_with(d));
    let plain = relative.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        && !relative.split('/').any(|part| part.is_empty() || part.starts_with('.'));
    let content_type = match Path::new(relative).extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => return None,
    };
    if !allowed_dir || !plain {
        return None;
    }
    // A symbolic link inside the package must not lead out of it.
    let root = std::fs::canonicalize(root).ok()?;
    let file = std::fs::canonicalize(root.join(relative)).ok()?;
    file.starts_with(&root).then_some((file, content_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A served folder with a page, a script, a secret beside it and a link
    /// out of it; removed when dropped.
    struct Package(PathBuf);

    impl Package {
        fn new(name: &str) -> Package {
            let base = std::env::temp_dir().join(format!("copilot-bridge-files-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            let root = base.join("npm");
            for dir in ["chat", "src", "dist", "private"] {
                std::fs::create_dir_all(root.join(dir)).unwrap();
            }
            std::fs::write(root.join("chat/index.html"), "<p>chat</p>").unwrap();
            std::fs::write(root.join("src/client.js"), "export {}").unwrap();
            std::fs::write(root.join("src/.hidden.js"), "secret").unwrap();
            std::fs::write(root.join("private/key.js"), "secret").unwrap();
            std::fs::write(root.join("package.json"), "{}").unwrap();
            std::fs::write(base.join("outside.js"), "secret").unwrap();
            #[cfg(unix)]
            std::os::unix::fs::symlink(base.join("outside.js"), root.join("dist/escape.js")).unwrap();
            Package(base)
        }

        fn root(&self) -> PathBuf {
            self.0.join("npm")
        }
    }

    impl Drop for Package {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_page_and_package_files_are_served() {
        let package = Package::new("served");
        let (file, kind) = resolve(&package.root(), "/").expect("the page");
        assert!(file.ends_with("chat/index.html") && kind.starts_with("text/html"));
        let (file, kind) = resolve(&package.root(), "/src/client.js").expect("a script");
        assert!(file.ends_with("src/client.js") && kind.starts_with("text/javascript"));
    }

    #[test]
    fn no_path_leaves_the_allow_list() {
        let package = Package::new("refused");
        for path in [
            "/../outside.js",
            "/src/../private/key.js",
            "/src/../../outside.js",
            "/src/./client.js",
            "/src//client.js",
            "/src/%2e%2e/private/key.js",
            "/src/..%2fprivate/key.js",
            "/src\\..\\private\\key.js",
            "/src/.hidden.js",
            "/private/key.js",
            "/package.json",
            "//src/client.js",
            "src/client.js",
            "/src/client.js/",
            "/src/missing.js",
            "/chat/index.html.bak",
            "/src/client.json",
        ] {
            assert_eq!(resolve(&package.root(), path), None, "{path}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_folder_is_not_followed() {
        let package = Package::new("link");
        assert!(package.root().join("dist/escape.js").is_file(), "the link resolves");
        assert_eq!(resolve(&package.root(), "/dist/escape.js"), None);
    }
}
