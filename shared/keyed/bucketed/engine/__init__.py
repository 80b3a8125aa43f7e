"""One call on a bucket's loaded state, in pandas: screening, control, expiry, the
processor's update, caps, admission, poison records, the figures sent to the driver.
pyspark's types, no JVM."""
