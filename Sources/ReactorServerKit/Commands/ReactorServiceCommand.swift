import ArgumentParser

/// The command line of a ``ReactorServiceApp``: `serve` (the default: `APP --port 8080`
/// serves), or a command on the store or the running server.
struct ReactorServiceCommand<App: ReactorServiceApp>: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: App.commandName,
            abstract: App.abstract,
            version: App.version,
            subcommands: [
                ServeCommand<App>.self, HealthCommand.self, BackupCommand.self, RestoreCommand.self,
                CheckCommand.self, CompactCommand.self, CopyCommand.self,
            ],
            defaultSubcommand: ServeCommand<App>.self
        )
    }
}
