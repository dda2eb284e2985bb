/// The Receipts module. See README.md, "Architecture".
public enum ReceiptsModule {}
