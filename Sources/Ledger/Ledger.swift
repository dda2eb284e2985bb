/// The Ledger module. See README.md, "Architecture".
public enum LedgerModule {}
