/// The AppleClients module. See README.md, "Architecture".
public enum AppleClientsModule {}
