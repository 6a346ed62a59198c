import pynvml as n
def cuda():
    return sorted({l.split()[-1].rsplit('/',1)[-1] for l in open('/proc/self/maps') if 'libcuda' in l})
print('start', cuda()); n.nvmlInit(); print('nvmlInit', cuda())
h = n.nvmlDeviceGetHandleByIndex(0); n.nvmlDeviceGetPowerUsage(h); n.nvmlDeviceGetUtilizationRates(h); print('power+util', cuda())
n.nvmlDeviceGetTotalEnergyConsumption(h); print('energy', cuda())
try:
    print('gpm supported', n.nvmlGpmQueryDeviceSupport(h).isSupportedDevice); s = n.nvmlGpmSampleAlloc(); n.nvmlGpmSampleGet(h, s); print('gpm sample', cuda())
except Exception as e: print('gpm', type(e).__name__, e)
