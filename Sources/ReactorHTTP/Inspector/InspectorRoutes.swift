import MicroHTTP

/// The inspector's pages and their scripts and styles, embedded in the binary from `Assets/`
/// (SwiftPM's `embedInCode`): no CDN and no build step, so they work offline.
///
/// - `GET /`: the landing page (the registered types, each with "create and inspect");
/// - `GET /inspector`: the inspector, opened as `/inspector#<id>` so that the id stays out of
///   logs and `Referer` headers;
/// - `GET /assets/<name>`: the files the two pages load (`auth.js`, which both load, sends the
///   token typed into their "Token" field, for a server that authenticates its callers).
///
/// Every answer is prepared once and shared. The pages forbid inline scripts and styles and
/// anything from another origin (`Content-Security-Policy`), and send no `Referer`.
enum InspectorRoutes {
    /// `GET /`.
    static let landingPage = asset(PackageResources.index_html, type: "text/html; charset=utf-8")
    /// `GET /inspector`.
    static let inspectorPage = asset(PackageResources.inspector_html, type: "text/html; charset=utf-8")

    /// The files under `/assets/`, by name.
    static let assets: [String: PreparedResponse] = [
        "auth.js": asset(PackageResources.auth_js, type: "text/javascript; charset=utf-8"),
        "common.css": asset(PackageResources.common_css, type: "text/css; charset=utf-8"),
        "inspector.css": asset(PackageResources.inspector_css, type: "text/css; charset=utf-8"),
        "inspector.js": asset(PackageResources.inspector_js, type: "text/javascript; charset=utf-8"),
        "landing.js": asset(PackageResources.landing_js, type: "text/javascript; charset=utf-8"),
    ]

    private static func asset(_ bytes: [UInt8], type: String) -> PreparedResponse {
        PreparedResponse(
            status: 200,
            headers: [
                "Content-Type": type,
                // Revalidated on each load: a new build serves new files at the same names.
                "Cache-Control": "no-cache",
                "Content-Security-Policy":
                    "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                "Referrer-Policy": "no-referrer",
                "X-Content-Type-Options": "nosniff",
            ], body: bytes)
    }
}
