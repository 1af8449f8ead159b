import ArgumentParser
import Foundation
import ReactorHTTP
import ReactorHosting

/// A service of a team's own reactors: its executable's whole `main`.
///
/// ```swift
/// import ReactorServerKit
///
/// @main
/// struct SearchService: ReactorServiceApp {
///     func register(_ reactors: inout ReactorRegistry, options: NoOptions) {
///         reactors.register("githubsearch") { GitHubSearchReactor(api: .live) }
///         reactors.register("profile") { (parameters: ProfileParameters, context) in
///             ProfileReactor(userID: parameters.userID)
///         }
///     }
/// }
/// ```
///
/// A registration that needs something first may wait for it and throw, and the service then
/// does not start:
///
/// ```swift
/// func register(_ reactors: inout ReactorRegistry, options: Options) async throws {
///     let catalog = try await Catalog.load(from: options.catalogURL)
///     reactors.register("shop") { ShopReactor(catalog: catalog) }
/// }
/// ```
///
/// The executable then has the whole command line of `reactor-server`: `serve` (the default)
/// with every flag and environment variable (the store, durability, several nodes, limits, logs,
/// traces, CORS), and `health`, `backup`, `restore`, `check`, `compact`, `copy` and `--version`.
/// The app's own ``Options`` join `serve`'s, in its `--help`.
public protocol ReactorServiceApp: Sendable {
    /// The app's own options: an ArgumentParser `ParsableArguments` type whose flags join those
    /// of `serve`. Read their defaults with ``ServiceEnvironment`` so that each also has an
    /// environment variable. ``NoOptions`` when the app has none.
    associatedtype Options: ParsableArguments = NoOptions

    /// The name the command line uses for itself in its help and `--version`; by default the
    /// executable's file name.
    static var commandName: String { get }

    /// One line on what the service serves, shown by `--help`.
    static var abstract: String { get }

    /// What `--version` prints; by default the command's name with the version and commit of
    /// the build (`git describe` as `make` and the Dockerfile pass it in `REACTOR_SERVER_VERSION`),
    /// or, in a build without them, with the ReactorServer release it was built against:
    /// `my-service (ReactorServer 0.2.0)` for 0.2.0. An app with a version of its own returns it
    /// here.
    static var version: String { get }

    /// Makes the app. It is made once, before `register(_:options:)`.
    init()

    /// Registers the reactor types the service serves. Called once when `serve` starts, with the
    /// app's options as parsed, before the server listens; every instance, new or brought back
    /// from the store, is made by the factories registered here.
    ///
    /// It may wait for what the factories need (a client of another service, a file read once)
    /// and throw when that cannot be had: `serve` then logs the error (`could not register the
    /// reactor types: …`) and exits 1, having served nothing. An implementation that neither
    /// waits nor throws satisfies it as it is written.
    func register(_ reactors: inout ReactorRegistry, options: Options) async throws

    /// Who may use the service, in the app's own way: an `Authenticator` mapping each request
    /// to its subject (or refusing it). Used with `--auth app`, the default when this returns
    /// one; nil (the default) leaves `--auth none` or `--auth jwt` to the command line.
    func authenticator(options: Options) -> (any Authenticator)?
}

extension ReactorServiceApp {
    public static var commandName: String {
        URL(fileURLWithPath: CommandLine.arguments.first ?? "reactor-service").lastPathComponent
    }

    public static var abstract: String { "Serves ReactorKit-style reactors over HTTP/JSON with server-sent events." }

    public static var version: String { VersionLine.describe(command: commandName) }

    /// No authenticator of the app's own.
    public func authenticator(options: Options) -> (any Authenticator)? { nil }

    /// Runs the command line: `serve` unless another command is named.
    public static func main() async {
        await ReactorServiceCommand<Self>.main()
    }
}

/// The options of an app that has none of its own.
public struct NoOptions: ParsableArguments {
    /// No options.
    public init() {}
}
